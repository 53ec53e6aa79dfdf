#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit + integration).
# Tests start their own origin and redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
werror=OFF
debug_info=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG")  # CMake's own default
if [ "${CI:-}" = "true" ]; then
  werror=ON
  # CI reads failures from line tables (-g1), not full debug info: the same -O2 code, built a
  # few minutes sooner on CI's 2 cores.
  debug_info=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_WERROR="$werror" "${debug_info[@]}"
cmake --build build -j "$(nproc)"
log=$(mktemp)
status=0
ctest --test-dir build --output-on-failure -j 2 --timeout 300 2>&1 | tee "$log" || status=$?
# A skipped test passes in ctest's count; CI fails the run on one (the tests themselves fail
# under CI=true where a tool or headroom is missing: tests/integration/cannot_run.hpp).
skipped=$(grep -cE '\(Skipped\)$' "$log" || true)
echo "skipped: $skipped"
grep -E '\(Skipped\)$' "$log" || true
rm -f "$log"
if [ "${CI:-}" = "true" ] && [ "$skipped" != 0 ]; then status=1; fi
exit "$status"
