#!/usr/bin/env bash
# What admin.top (top offenders, on by default with an admin listener) costs on the hot path,
# measured with the peer harness (../shared/bench, the one place this script needs it):
#
#   bench/top.sh [OUT_DIR]     # default OUT_DIR: /tmp/floodgate-top-<timestamp>
#
# Rows, ROUNDS rounds (default 3) interleaved by the harness:
#   fg-mem       the harness's `memory` row: token bucket per IP, embedded store, top on
#   product      the same config with `admin.top: off` (bench/top-off.sh)
#   nginx-plain  proxy_pass, the reference the other benchmark pages use
# Two runs, the ports of the two floodgate rows swapped in the second: on this machine a port
# alone moves throughput by a few percent (probably how the kernel's SO_REUSEPORT hash spreads wrk's 64
# connections over the 2 workers), more than the cost measured. The cost is 1 - fg-mem /
# product in requests per second, the geometric mean of the two runs' medians (target: at
# most 3 %). The micro-benchmarks (BM_TopCount*) give the nanoseconds behind it.
set -euo pipefail
cd "$(dirname "$0")/.."
harness=${BENCH_HARNESS:-../shared/bench}
[[ -x $harness/run.sh ]] || { echo "top.sh: no peer harness at $harness (set BENCH_HARNESS)" >&2; exit 2; }
[[ -x build/floodgate ]] || { echo "top.sh: build first: cmake --build build" >&2; exit 2; }
out=${1:-/tmp/floodgate-top-$(date +%Y%m%d-%H%M%S)}
export FLOODGATE_BIN=build/floodgate
export ROUNDS=${ROUNDS:-3} REDIS_BENCH=0 PRODUCT_VARIANTS=high
export PRODUCT_ROWS="fg-mem=memory:high"
export PRODUCT_CMD="bench/top-off.sh {PORT} {ORIGIN_PORT} {LIMIT}"
export PEERS=${PEERS:-"nginx-plain"}
BENCH_OUT=$out/a "$harness/run.sh"                                               # top off 18100, on 18102
BENCH_OUT=$out/b PRODUCT_PORT=18102 PRODUCT_ROWS_PORT=18100 "$harness/run.sh"  # swapped
ratio() { awk '$2 !~ /^[0-9]+$/ { next } $1 == "fg-mem" { on = $2 } $1 == "product" { off = $2 } END { print on / off }' "$1/table.txt"; }
a=$(ratio "$out/a") b=$(ratio "$out/b")
awk -v a="$a" -v b="$b" 'BEGIN { g = sqrt(a * b);
  printf "top.sh: fg-mem (top on) / product (top off), median req/s: %.3f and %.3f with the ports swapped; geometric mean %.3f: admin.top costs %.1f %%\n", a, b, g, (1 - g) * 100 }' |
  tee "$out/summary.txt"
echo "top.sh: results in $out/a and $out/b"
