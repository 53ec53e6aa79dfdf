#!/usr/bin/env bash
# How fast `floodgate replay` decides logged traffic, and how its memory grows.
#
#   bench/replay.sh            10 million requests (a generated day), floodgate JSON and
#                              nginx combined, with and without a baseline, plus gzip input
# Environment: REQUESTS (10000000), SMALL (1000000: the memory comparison), OUT (a new /tmp
# dir, kept: the logs, reports and timings), FLOODGATE_BIN (build/floodgate),
# LOGGEN_BIN (build/replay_loggen). Needs GNU time (/usr/bin/time) for peak memory.
#
# The generated day (bench/replay_loggen.cpp) and the two configs (bench/configs/replay-
# baseline.yaml, replay-candidate.yaml) are the ones docs/benchmarks.md §replay reports.
# "per CPU-second" is requests / (user + system time of the replay process): per core.
# Stand-alone: nothing here uses ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${FLOODGATE_BIN:-build/floodgate}
gen=${LOGGEN_BIN:-build/replay_loggen}
requests=${REQUESTS:-10000000}
small=${SMALL:-1000000}
out=${OUT:-$(mktemp -d /tmp/floodgate-replay-bench.XXXXXX)}
candidate=bench/configs/replay-candidate.yaml
baseline=bench/configs/replay-baseline.yaml
for f in "$bin" "$gen"; do [[ -x $f ]] || { echo "replay.sh: $f is missing (cmake --build build)" >&2; exit 2; }; done
[[ -x /usr/bin/time ]] || { echo "replay.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
mkdir -p "$out"

echo "generating logs in $out ..." >&2
"$gen" --requests "$requests" --format json >"$out/day.json.log"
"$gen" --requests "$requests" --format nginx >"$out/day.nginx.log"
"$gen" --requests "$small" --format json >"$out/small.json.log"
gzip -1 -c "$out/small.json.log" >"$out/small.json.log.gz"
# Memory follows the live keys, not the log: the same day's rate for one day and for two.
"$gen" --requests $((requests / 2)) --days 1 --format json >"$out/one-day.json.log"
"$gen" --requests "$requests" --days 2 --format json >"$out/two-days.json.log"

# One replay: prints a row "name requests wall_s req_per_s per_cpu_s live_keys max_rss_mib".
run() {
  local name=$1; shift
  /usr/bin/time -f '%M' -o "$out/$name.rss" "$bin" replay --quiet --json "$@" >"$out/$name.json"
  python3 - "$name" "$out/$name.json" "$out/$name.rss" <<'PY'
import json, sys
name, report, rss = sys.argv[1], json.load(open(sys.argv[2])), int(open(sys.argv[3]).read().split()[-1])
n = report["lines"]["requests"]
print(f'{name:<24} {n:>11,} {report["wall_seconds"]:>7.2f} {n / report["wall_seconds"] / 1e6:>8.2f} '
      f'{n / report["cpu_seconds"] / 1e6:>10.2f} {report["peak_live_keys"]:>10,} {rss / 1024:>8.1f}')
PY
}

{
  printf '%-24s %11s %7s %8s %10s %10s %8s\n' run requests wall_s M/s M/cpu-s live_keys rss_MiB
  run json-candidate --config "$candidate" "$out/day.json.log"
  run json-with-baseline --config "$candidate" --baseline "$baseline" "$out/day.json.log"
  run nginx-candidate --config "$candidate" "$out/day.nginx.log"
  run nginx-with-baseline --config "$candidate" --baseline "$baseline" "$out/day.nginx.log"
  run json-small --config "$candidate" "$out/small.json.log"
  run json-small-gzip --config "$candidate" "$out/small.json.log.gz"
  run one-day --config "$candidate" "$out/one-day.json.log"
  run two-days-same-rate --config "$candidate" "$out/two-days.json.log"
} | tee "$out/table.txt"
"$bin" replay --quiet --config "$candidate" --baseline "$baseline" --html "$out/report.html" \
  "$out/day.json.log" >"$out/report.txt"
echo "text report: $out/report.txt; HTML: $out/report.html" >&2
