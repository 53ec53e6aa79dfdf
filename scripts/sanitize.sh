#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer (and leak
# checking) in build-asan/ and runs it; fails on any test failure or sanitizer report.
# Takes ~8 minutes on 2 cores. Not part of CI yet (issue 8 will add it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFLOODGATE_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -O1" >/dev/null
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
log=$(mktemp)
status=0
build-asan/tests/unit_tests >"$log" 2>&1 || status=1
build-asan/tests/integration_tests >>"$log" 2>&1 || status=1
reports=$(grep -cE "runtime error|ERROR: (Address|Leak)Sanitizer" "$log" || true)
grep -E "^\[  (PASSED|FAILED)" "$log" || true
echo "sanitizer reports: $reports (full log: $log)"
[ "$status" = 0 ] && [ "$reports" = 0 ]
