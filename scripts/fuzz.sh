#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang; AddressSanitizer, UndefinedBehaviorSanitizer
# and LeakSanitizer) in build-fuzz/ and runs each for SECONDS_PER_TARGET (default 30) on a
# scratch copy of its seed corpus, so the committed seeds stay small and reviewed; as many
# targets at a time as there are cores (each libFuzzer process uses one).
# Prints one line per target; exits non-zero on any crash, leak, timeout or out-of-memory,
# with the input kept in build-fuzz/artifacts/ (replay: build-fuzz/fuzz/TARGET FILE).
# CI runs `scripts/fuzz.sh 20`; a longer local run is `scripts/fuzz.sh 600`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
targets=(fuzz_request fuzz_config fuzz_jwt fuzz_redis_reply fuzz_cluster_reply fuzz_log_line fuzz_h2_frames
  fuzz_h2_upstream fuzz_tzif fuzz_client_hello fuzz_rls_request fuzz_jwks
  fuzz_key_parts fuzz_quic)

scripts/install-deps.sh >/dev/null
# Optimised but with line tables for the reports, and with assertions kept (no -DNDEBUG):
# Beast's BOOST_ASSERTs are checks worth fuzzing. The sanitizer flags come from FLOODGATE_FUZZ.
# A unity build, as scripts/sanitize.sh's: 3 minutes on 2 cores instead of 6.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DFLOODGATE_FUZZ=ON \
  -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >/dev/null
cmake --build build-fuzz --target fuzzers -j "$(nproc)"

export UBSAN_OPTIONS=print_stacktrace=1
mkdir -p build-fuzz/artifacts build-fuzz/logs
# One target: its scratch corpus, its log, and one line of result in build-fuzz/logs/T.result
# (FAILED lines followed by what the log says).
run_target() {
  local t=$1 corpus=build-fuzz/corpus/$1 log=build-fuzz/logs/$1.log result=build-fuzz/logs/$1.result
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp fuzz/corpus/"$t"/* "$corpus"/
  if [ "$t" = fuzz_tzif ]; then  # real zones as seeds too: tzdata's files, not copied here
    for z in Europe/Berlin America/Santiago Australia/Lord_Howe Asia/Kolkata UTC; do
      if [ -f /usr/share/zoneinfo/$z ]; then cp /usr/share/zoneinfo/$z "$corpus/${z//\//_}"; fi
    done
  fi
  local dict=()
  if [ -f fuzz/"$t".dict ]; then dict=(-dict=fuzz/"$t".dict); fi
  local status=0
  # stdin from /dev/null: a fuzzed config may name /dev/stdin as a key file.
  build-fuzz/fuzz/"$t" "$corpus" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=5 -artifact_prefix=build-fuzz/artifacts/"$t"- </dev/null >"$log" 2>&1 || status=$?
  local done_line
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)
  if [ "$status" -ne 0 ] || [ -z "$done_line" ]; then
    echo "fuzz $t: FAILED (exit $status), log $log" >"$result"
    grep -E 'ERROR: |runtime error|SUMMARY|Test unit written to' "$log" | head -n 10 >>"$result" || true
    return
  fi
  local runs secs inputs
  runs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1/' <<<"$done_line")
  secs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\2/' <<<"$done_line")
  inputs=$(find "$corpus" -type f | wc -l)
  echo "fuzz $t: $runs executions in $secs s, $inputs inputs, 0 crashes" >"$result"
}
# Each libFuzzer process uses one core: as many targets at a time as there are cores.
jobs=$(nproc)
rm -f build-fuzz/logs/*.result  # a missing result is then a failure, never an old success
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  for t in "${targets[@]:i:jobs}"; do run_target "$t" & done
  wait
done
failed=0
for t in "${targets[@]}"; do
  cat build-fuzz/logs/"$t".result
  if grep -q FAILED build-fuzz/logs/"$t".result; then failed=1; fi
done
exit "$failed"
