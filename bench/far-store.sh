#!/usr/bin/env bash
# The latency floodgate adds when its Redis is far away: exact against leased decisions, with
# the store 1, 10 and 50 ms away (round trip).
#
#   bench/far-store.sh [--dir DIR]
#     --dir DIR   results directory (default /tmp/floodgate-far-store/<timestamp>): summary.tsv,
#                 table.txt, meta.txt, h2load/ (each run's output and per-request log), the
#                 processes' logs
#
# Environment: DISTANCES ("1 10 50": round trips in ms), DURATION (10 s per run), RATE (1000
#   requests/s in all, spread over CONNS (8) keep-alive HTTP/1.1 connections), LEASE (200:
#   units per lease), THREADS (2), FLOODGATE_BIN (build/floodgate), ORIGIN_BIN
#   (build/floodgate-test-origin), DELAY_BIN (build/floodgate-delay-proxy), TLS (0; 1: Redis on
#   its tls-port only, with a CA, a server and a client certificate made by openssl for the run,
#   and floodgate with store.redis.tls; the delay proxy relays the TLS bytes as they are).
#
# For each distance: a private redis-server, floodgate-delay-proxy holding every chunk for
# half the round trip each way between floodgate and it (the machine's loopback is not
# touched), and one floodgate with three routes on the same origin:
#   /pass     no limit: the baseline ("added" is measured against it)
#   /exact    a token bucket on one hot key (key: [route], never refused): a store call each
#   /leased   the same bucket with `lease: { size: LEASE, ttl: 2s }`
# `h2load --h1 -cCONNS --rps=RATE/CONNS -D DURATION` per route, in that order, after a second of
# warm-up each; latency percentiles from h2load's per-request log. Target (issue 18): the
# leased p99 added at most 2 ms at every distance.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
dir_args "$@"
out_dir=${out_dir:-/tmp/floodgate-far-store/$(date +%Y%m%d-%H%M%S)}
distances=${DISTANCES:-"1 10 50"}
duration=${DURATION:-10} rate=${RATE:-1000} conns=${CONNS:-8} lease=${LEASE:-200}
threads=${THREADS:-2}
fg_bin=${FLOODGATE_BIN:-build/floodgate} origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
delay_bin=${DELAY_BIN:-build/floodgate-delay-proxy}
busy_pattern='' busy_wait=0
tls=${TLS:-0}
need_tools h2load redis-server redis-cli curl python3
[[ $tls != 1 ]] || need_tools openssl
for b in "$fg_bin" "$origin_bin" "$delay_bin"; do
  [[ -x $b ]] || die "no $b: cmake --build build (the delay proxy is built with the tests)"
done
bench_init h2load far-store

meta date "$(date -Is)"
meta host "$(uname -srm), $(nproc) cores"
meta floodgate "$("$fg_bin" --version 2>/dev/null | head -n1)"
meta load "h2load --h1 -c$conns --rps=$((rate / conns)) -D$duration per route, 1 s warm-up"
meta lease "size $lease, ttl 2s"
meta redis_tls "$tls"

# TLS: a throwaway CA and one EC leaf for 127.0.0.1, good as server and as client.
redis_tls_args=() cli_tls=() fg_tls=''
if [[ $tls == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj '/CN=far-store bench CA' -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=127.0.0.1' \
    -keyout "$tmp/leaf.key" -out "$tmp/leaf.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$tmp/leaf.ext"
  openssl x509 -req -in "$tmp/leaf.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial \
    -days 2 -extfile "$tmp/leaf.ext" -out "$tmp/leaf.pem" 2>/dev/null
  redis_tls_args=(--tls-cert-file "$tmp/leaf.pem" --tls-key-file "$tmp/leaf.key"
    --tls-ca-cert-file "$tmp/ca.pem" --tls-auth-clients yes)
  cli_tls=(--tls --cacert "$tmp/ca.pem" --cert "$tmp/leaf.pem" --key "$tmp/leaf.key")
  fg_tls=", tls: { ca_file: $tmp/ca.pem, cert: $tmp/leaf.pem, key: $tmp/leaf.key }"
fi

start_origin
per_conn=$((rate / conns))
printf 'distance_ms\troute\trequests\tp50_ms\tp90_ms\tp99_ms\tmax_ms\n' >"$out_dir/summary.tsv"

# percentiles LOG: "count p50 p90 p99 max" in ms from h2load's per-request log (the third
# column is each request's time in microseconds).
percentiles() {
  python3 - "$1" <<'PY'
import sys
d = sorted(int(l.split()[2]) for l in open(sys.argv[1]) if l.strip() and l.split()[1] == "200")
if not d:
    print("0 nan nan nan nan"); sys.exit()
q = lambda p: d[min(len(d) - 1, int(p * len(d)))] / 1000
print(len(d), "%.3f %.3f %.3f %.3f" % (q(.5), q(.9), q(.99), d[-1] / 1000))
PY
}

for distance in $distances; do
  redis_port=$(free_port)
  if [[ $tls == 1 ]]; then ports=(--port 0 --tls-port "$redis_port"); else ports=(--port "$redis_port"); fi
  redis-server "${ports[@]}" "${redis_tls_args[@]}" --bind 127.0.0.1 --save '' --appendonly no \
    --logfile "$out_dir/redis-$distance.log" & pids+=($!)
  for _ in $(seq 50); do redis-cli "${cli_tls[@]}" -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  one_way=$((distance * 500))
  "$delay_bin" "$redis_port" "$one_way" >"$tmp/delay.port" 2>"$out_dir/delay-$distance.log" & pids+=($!)
  for _ in $(seq 50); do [[ -s $tmp/delay.port ]] && break; sleep 0.1; done
  far_port=$(head -n1 "$tmp/delay.port")
  port=$(free_port) admin=$(free_port)
  timeout_ms=$((distance * 4 + 100))
  bucket="algorithm: token_bucket, capacity: 1000000000, refill_rate: 1000000000/s, key: [route]"
  cat >"$tmp/fg-$distance.yaml" <<EOF
server:
  listen: [127.0.0.1:$port]
  threads: $threads
admin: { listen: 127.0.0.1:$admin, top: off }
log: { level: warn }
upstreams:
  origin: { url: "http://127.0.0.1:$origin_port" }
store:
  backend: redis
  redis: { address: "127.0.0.1:$far_port", timeout: ${timeout_ms}ms$fg_tls }
  key_secret: far-store-bench-secret-0123456789
routes:
  - { name: pass, match: { path_prefix: /pass }, upstream: origin }
  - name: exact
    match: { path_prefix: /exact }
    upstream: origin
    limits: [{ name: hot, $bucket }]
  - name: leased
    match: { path_prefix: /leased }
    upstream: origin
    limits: [{ name: hot, $bucket, lease: { size: $lease, ttl: 2s } }]
EOF
  "$fg_bin" --config "$tmp/fg-$distance.yaml" >"$out_dir/floodgate-$distance.log" 2>&1 & fg_pid=$!
  pids+=("$fg_pid")
  wait_http "$fg_pid" 100 "http://127.0.0.1:$admin/readyz" || die "floodgate did not start (see $out_dir/floodgate-$distance.log)"
  for route in pass exact leased; do
    url=http://127.0.0.1:$port/$route
    h2load --h1 -c"$conns" --rps="$per_conn" -D1 "$url" >/dev/null 2>&1 || true
    log=$out_dir/h2load/$distance-$route.log
    run_load h2load --h1 -c"$conns" --rps="$per_conn" -D"$duration" --log-file="$log" "$url" \
      >"$out_dir/h2load/$distance-$route.txt" 2>&1
    read -r n p50 p90 p99 max < <(percentiles "$log")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$distance" "$route" "$n" "$p50" "$p90" "$p99" "$max" \
      >>"$out_dir/summary.tsv"
  done
  curl -fs "http://127.0.0.1:$admin/metrics" | grep '^floodgate_lease' >"$out_dir/lease-metrics-$distance.txt" || true
  kill -TERM "$fg_pid" 2>/dev/null || true
  wait "$fg_pid" 2>/dev/null || true
done

python3 - "$out_dir/summary.tsv" <<'PY' | tee "$out_dir/table.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {(r["distance_ms"], r["route"]): r for r in rows}
print("| store round trip | route | requests | p50 | p99 | p50 added | p99 added |")
print("|---:|---|---:|---:|---:|---:|---:|")
for r in rows:
    base = by[(r["distance_ms"], "pass")]
    added = lambda k: float(r[k]) - float(base[k])
    print("| %s ms | %s | %s | %.2f ms | %.2f ms | %s | %s |" % (
        r["distance_ms"], r["route"], r["requests"], float(r["p50_ms"]), float(r["p99_ms"]),
        "" if r["route"] == "pass" else "%.2f ms" % added("p50_ms"),
        "" if r["route"] == "pass" else "%.2f ms" % added("p99_ms")))
PY
note "results in $out_dir"
