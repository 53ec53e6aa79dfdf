#!/usr/bin/env bash
# Regenerates docs/benchmarks.md in one command: builds (RelWithDebInfo, as shipped), runs the
# micro-benchmarks, runs the peer comparison (bench/peers.sh: ~25 min with ROUNDS=3, needs
# ../shared/bench), then writes the tables, the targets and the plot (bench/report.py).
#
#   bench/regenerate.sh              # a new run
#   bench/regenerate.sh --from DIR   # re-render from an earlier peers.sh result directory
#
# Needs gnuplot (apt-get install gnuplot-nox) and python3. Keep the machine otherwise idle:
# the peer numbers are ratios between rows of one run on two shared cores.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gnuplot >/dev/null || { echo "regenerate.sh needs gnuplot: apt-get install gnuplot-nox" >&2; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target floodgate micro_bench
if [[ ${1:-} == --from ]]; then
  out=${2:?--from needs a directory}
else
  out=/tmp/floodgate-peers-$(date +%Y%m%d-%H%M%S)
  bench/peers.sh "$out"
fi
if [[ ! -f $out/micro.json ]]; then
  build/micro_bench --benchmark_min_time=0.5 --benchmark_format=json --benchmark_out="$out/micro.json" \
    --benchmark_out_format=json >/dev/null
fi
python3 bench/report.py "$out" "$out/micro.json"
