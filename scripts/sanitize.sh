#!/usr/bin/env bash
# The whole test suite under a sanitizer; fails on any test failure or sanitizer report.
#
#   scripts/sanitize.sh [address|thread]
#     address  AddressSanitizer + UndefinedBehaviorSanitizer + leak checking, in build-asan/
#     thread   ThreadSanitizer, in build-tsan/ (the workers, the shared memory store, the
#              admin thread reading metrics and health, reload and drain across threads)
#
# The test origin is a fixture, not the subject: both use build/'s, unsanitized (built here
# first if it is not there), instead of compiling its Beast coroutines instrumented again.
# CI runs both (.ci/run); each takes minutes on 2 cores, mostly compiling. -Og, not -O1: the
# instrumented compile is the longest part of CI (the old upstream_leg.cpp under ASan + UBSan: 47 s at
# -O1, 33 s at -Og), and the tests mostly wait on sockets and processes, not on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
case "$mode" in
  address)
    dir=build-asan
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Og -g1"
    export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
    pattern="runtime error|ERROR: (Address|Leak)Sanitizer"
    ;;
  thread)
    dir=build-tsan
    flags="-fsanitize=thread -Og -g1"
    export TSAN_OPTIONS="second_deadlock_stack=1"
    pattern="WARNING: ThreadSanitizer|ERROR: ThreadSanitizer"
    ;;
  *) echo "usage: scripts/sanitize.sh [address|thread]" >&2; exit 2 ;;
esac
scripts/install-deps.sh >/dev/null
[ -f build/CMakeCache.txt ] || cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)" --target floodgate-test-origin >/dev/null
# CMAKE_CXX_FLAGS_DEBUG is emptied: its -g would follow ours and undo -g1 (line tables and
# function names are all a report needs; full debug info cost a quarter of the build).
# Libraries and test executables are built as unity builds (eight sources a translation
# unit: Asio's, Beast's and GoogleTest's templates instantiated once a batch instead of once
# a file): the libraries took the instrumented build from about 13 to 6 minutes, the tests'
# compile under ASan went from 886 to 460 CPU-seconds. scripts/test.sh still compiles every
# file on its own, so a file that leans on another's includes fails there; here, two test
# files of one batch defining the same helper in their anonymous namespaces fail to compile
# (name helpers for what they do: load_routes, not load).
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 -DFLOODGATE_UNITY_TESTS=ON -DFLOODGATE_BENCH=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="${flags%% *}" \
  -DFLOODGATE_PREBUILT_ORIGIN="$PWD/build/floodgate-test-origin" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target unit_tests integration_tests floodgate
# The integration tests spend most of their time waiting (timeouts, child processes): two
# GoogleTest shards run side by side, as ctest -j 2 runs them in the plain build (every test
# takes its own free ports), alongside the unit tests.
# Not run here, said rather than skipped (a skip fails CI): the test that exhausts this
# process's descriptors on purpose (the sanitizer runtimes need descriptors of their own).
export GTEST_FILTER='-Abuse.OutOfDescriptorsPausesAcceptingAndLogsOncePerSecond'
echo "not run under the sanitizer: Abuse.OutOfDescriptorsPausesAcceptingAndLogsOncePerSecond"
log=$(mktemp)
pids=()
for shard in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$shard "$dir/tests/integration_tests" >"$log.$shard" 2>&1 &
  pids+=($!)
done
status=0
"$dir/tests/unit_tests" >"$log" 2>&1 || status=1
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat "$log.0" "$log.1" >>"$log" && rm -f "$log.0" "$log.1"
reports=$(grep -cE "$pattern" "$log" || true)
# Each skipped test's line (its name and time); GoogleTest's summary repeats the names bare.
skipped=$(grep -E '^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$' "$log" || true)
echo "skipped: $(printf '%s' "$skipped" | grep -c . || true)"
[ -z "$skipped" ] || { echo "$skipped"; status=1; }
grep -E "^\[  (PASSED|FAILED)" "$log" || true
# What each failed expectation said (CI keeps only this output, not the log).
grep -A8 -E ": Failure$" "$log" | head -120 || true
echo "$mode sanitizer: $reports reports, test status $status (full log: $log)"
[ "$status" = 0 ] && [ "$reports" = 0 ]
