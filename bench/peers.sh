#!/usr/bin/env bash
# floodgate against its peers (nginx proxy_pass and limit_req, the Node + Redis limiter) with
# ../shared/bench, the peer harness that sits next to this repository on the project's
# benchmark machine. It is the only script here that needs ../shared; nothing in the build or
# the tests does.
#
#   bench/peers.sh [OUT_DIR]        # default OUT_DIR: /tmp/floodgate-peers-<timestamp>
#
# Rows (issue 7's scenarios): fg-pass (no limits), fg-mem (token bucket, embedded store),
# fg-redis (token bucket in Redis), fg-redis3 (three limits, one script call), fg-redis-low /
# fg-mem-low (~100 % refused: the 429 path), and fg-redis-leased (issue 18: the token bucket
# with `lease: {size: 100, ttl: 2s}`, the harness's `leased` mode, run as its PRODUCT_CMD row
# "product" since PRODUCT_ROWS does not take that mode), against nginx-plain, nginx-lr-high,
# nginx-lr-low, node-rlf-high, node-rlf-low and node-luatb-high (the harness's plain Lua token
# bucket: issue 18 compares Redis's CPU per decision with it). Environment passes through to
# the harness: ROUNDS (default 3), DURATION, PEERS, PRODUCT_ROWS, ... (see
# ../shared/bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
harness=${BENCH_HARNESS:-../shared/bench}
[[ -x $harness/run.sh ]] || { echo "peers.sh: no peer harness at $harness (set BENCH_HARNESS)" >&2; exit 2; }
[[ -x build/floodgate ]] || { echo "peers.sh: build first: cmake --build build" >&2; exit 2; }
out=${1:-/tmp/floodgate-peers-$(date +%Y%m%d-%H%M%S)}
export FLOODGATE_BIN=build/floodgate BENCH_OUT=$out
export ROUNDS=${ROUNDS:-3}
export PRODUCT_ROWS=${PRODUCT_ROWS:-"fg-pass=pass:high fg-mem=memory:high fg-redis=redis:high fg-redis3=redis3:high fg-redis-low=redis:low fg-mem-low=memory:low"}
export PEERS=${PEERS:-"nginx-plain nginx-lr-high nginx-lr-low node-rlf-high node-rlf-low node-luatb-high"}
export PRODUCT_CMD=${PRODUCT_CMD-"$harness/floodgate.sh leased {PORT} {ORIGIN_PORT} {REDIS_HOST} {REDIS_PORT} {LIMIT}"}
export PRODUCT_VARIANTS=${PRODUCT_VARIANTS:-high}
"$harness/run.sh"
echo "peers.sh: results in $out"
