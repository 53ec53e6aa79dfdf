#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit + integration).
# Tests start their own origin and redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_WERROR="$werror"
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j 2 --timeout 300
