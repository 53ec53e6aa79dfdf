#!/usr/bin/env bash
# What admin.top (top offenders, on by default with an admin listener) costs on the hot path,
# measured with the peer harness (../shared/bench, the one place this script needs it):
#
#   bench/top.sh [OUT_DIR]     # default OUT_DIR: /tmp/floodgate-top-<timestamp>
#
# Rows, in one run, ROUNDS rounds (default 3) interleaved by the harness:
#   fg-mem     the harness's `memory` row: token bucket per IP, embedded store, top on
#   product    the same config with `admin.top: off` (bench/top-off.sh)
#   nginx-plain  proxy_pass, the reference the other benchmark pages use
# The cost is 1 - fg-mem / product in requests per second (target: at most 3 %). The
# micro-benchmarks (BM_TopCount*) give the per-request nanoseconds behind it.
set -euo pipefail
cd "$(dirname "$0")/.."
harness=${BENCH_HARNESS:-../shared/bench}
[[ -x $harness/run.sh ]] || { echo "top.sh: no peer harness at $harness (set BENCH_HARNESS)" >&2; exit 2; }
[[ -x build/floodgate ]] || { echo "top.sh: build first: cmake --build build" >&2; exit 2; }
out=${1:-/tmp/floodgate-top-$(date +%Y%m%d-%H%M%S)}
export FLOODGATE_BIN=build/floodgate BENCH_OUT=$out
export ROUNDS=${ROUNDS:-3} REDIS_BENCH=0 PRODUCT_VARIANTS=high
export PRODUCT_ROWS="fg-mem=memory:high"
export PRODUCT_CMD="bench/top-off.sh {PORT} {ORIGIN_PORT} {LIMIT}"
export PEERS=${PEERS:-"nginx-plain"}
"$harness/run.sh"
echo "top.sh: results in $out (row product = fg-mem with admin.top: off)"
