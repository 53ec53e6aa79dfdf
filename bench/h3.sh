#!/usr/bin/env bash
# floodgate's HTTP/3 against its own HTTP/2 on the same TLS listener, in one run (no Debian
# peer serves HTTP/3 to compare with, and Debian's h2load is built without it).
#
#   bench/h3.sh [--dir DIR]
#
# One floodgate (bench/configs/h3.yaml: `protocols: [h3, h2]`, THREADS workers) in front of
# the test origin. Each run sends REQUESTS requests over one connection with up to 128 streams
# at once: HTTP/3 with ngtcp2's example client (`gtlsclient -q -n REQUESTS`), HTTP/2 with
# `h2load -n REQUESTS -c 1 -m 128`; both over TLS, each one handshake, then only streams.
# Paths: pass (/, forwarded to the origin) and 429 (/limited, refused by floodgate itself).
# us/req is floodgate's user+system CPU per request (/proc, around each run); req/s is
# REQUESTS over the run's wall time. ROUNDS rounds, h3 and h2 alternating (who goes first
# alternates by round); the medians, and h3/h2 ratios of CPU per request (below 1: HTTP/3
# costs less) and of req/s. The clients differ (gtlsclient is an example client, not a load
# generator), so the CPU figures are floodgate's own and comparable; req/s is the weaker one.
# Environment: REQUESTS (20000), ROUNDS (3), THREADS (1), FLOODGATE_BIN (build/floodgate),
# ORIGIN_BIN (build/floodgate-test-origin). Stand-alone: nothing here uses ../shared.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
repo=$PWD
# shellcheck source=bench/lib.sh
source bench/lib.sh

dir_args "$@"
requests=${REQUESTS:-20000}
rounds=${ROUNDS:-3}
threads=${THREADS:-1}
fg_bin=${FLOODGATE_BIN:-build/floodgate}
origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
fg_skip=0
busy_pattern=${BUSY_PATTERN-cc1plus|ninja|integration_tests|unit_tests|micro_bench}
busy_wait=${BUSY_WAIT:-900}
out_dir=${out_dir:-/tmp/floodgate-h3-bench/$(date +%Y%m%d-%H%M%S)}
need_tools gtlsclient h2load openssl curl python3
check_binaries
bench_init raw floodgate-h3

make_cert
start_origin
floodgate_env
"$fg_bin" --check-config bench/configs/h3.yaml >"$tmp/check.txt" 2>&1 ||
  { sed 's/^/    /' "$tmp/check.txt" >&2; die "floodgate rejects bench/configs/h3.yaml"; }
start_floodgate bench/configs/h3.yaml || floodgate_not_ready
url=https://localhost:$FG_TLS_PORT

# load PROTOCOL PATH OUTFILE: one run's requests, its client's output in OUTFILE.
load() {
  case $1 in
    h3) gtlsclient -q --exit-on-all-streams-close -n "$requests" 127.0.0.1 "$FG_TLS_PORT" "$url$2" >"$3" 2>&1 ;;
    h2) h2load -n "$requests" -c 1 -m 128 "$url$2" >"$3" 2>&1 ;;
  esac
}

# The requests floodgate has answered so far (floodgate_requests_total, every series): each
# run must add exactly REQUESTS, or it is reported as failed.
answered() {
  curl -fs "http://127.0.0.1:$FG_ADMIN_PORT/metrics" |
    awk '/^floodgate_requests_total[{ ]/ { n += $NF } END { printf "%d", n }'
}

# One of each before measuring: pools, allocators, caches.
for p in h3 h2; do load "$p" / "$tmp/warm.txt"; load "$p" /limited "$tmp/warm.txt"; done
results=$out_dir/results.tsv
printf 'round\tpath\tprotocol\tus_per_req\treq_per_s\tnoisy\n' >"$results"
for ((r = 1; r <= rounds; r++)); do
  order=(h3 h2)
  ((r % 2 == 0)) && order=(h2 h3)
  for path in pass 429; do
    target=/; [[ $path == 429 ]] && target=/limited
    for p in "${order[@]}"; do
      before=$(answered)
      timed_run "$fg_pid" load "$p" "$target" "$out_dir/raw/$p-$path-$r.txt"
      got=$(($(answered) - before))
      ((got == requests)) || die "$p $path round $r: $got of $requests requests answered (see $out_dir/raw)"
      rps=$(awk -v n="$requests" -v a="$run_t0" -v b="$run_t1" 'BEGIN { printf "%.0f", n / (b - a) }')
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$path" "$p" "$(proxy_us_per_req "$requests")" "$rps" "$run_noisy" >>"$results"
    done
  done
done
python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
print(f"{'path':6} {'proto':5} {'us/req':>8} {'req/s':>8}")
med = {}
for path in ('pass', '429'):
    for p in ('h3', 'h2'):
        sel = [r for r in rows if r['path'] == path and r['protocol'] == p]
        us = statistics.median(float(r['us_per_req']) for r in sel)
        rps = statistics.median(float(r['req_per_s']) for r in sel)
        med[path, p] = (us, rps)
        noisy = ' (noisy)' if any(r['noisy'] == '1' for r in sel) else ''
        print(f"{path:6} {p:5} {us:8.1f} {rps:8.0f}{noisy}")
for path in ('pass', '429'):
    (u3, r3), (u2, r2) = med[path, 'h3'], med[path, 'h2']
    print(f"{path}: h3/h2 CPU per request {u3 / u2:.2f}, req/s {r3 / r2:.2f}")
PY
echo "results: $out_dir"
