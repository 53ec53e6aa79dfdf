#!/usr/bin/env bash
# What an exact Redis decision adds to one request at low load: one client, sequential
# requests on one keep-alive connection per floodgate, interleaved between a floodgate on the
# embedded store and one on Redis (loopback), against the Redis round trip plus script time.
#
#   bench/redis-latency.sh [--dir DIR]
#
# Environment: N (5000 requests per floodgate per run), RUNS (3), FLOODGATE_BIN
#   (build/floodgate), ORIGIN_BIN (build/floodgate-test-origin), CLIENT_BIN (build/seq_latency).
#
# Both floodgates: threads 1, one route, a token bucket on [ip] far from its capacity. Per
# run: p50/p90/p99 per floodgate (build/seq_latency), then the Redis side: the PING round trip
# (redis-benchmark -c 1 -t ping: its p50) and the acquire script's time inside Redis (INFO commandstats,
# usec_per_call of FCALL). Target (issue 18): added median - (PING round trip + script time)
# <= 0.1 ms.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
dir_args "$@"
out_dir=${out_dir:-/tmp/floodgate-redis-latency/$(date +%Y%m%d-%H%M%S)}
n=${N:-5000} runs=${RUNS:-3}
fg_bin=${FLOODGATE_BIN:-build/floodgate} origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
client_bin=${CLIENT_BIN:-build/seq_latency}
busy_pattern='' busy_wait=0
need_tools redis-server redis-cli redis-benchmark curl python3
for b in "$fg_bin" "$origin_bin" "$client_bin"; do [[ -x $b ]] || die "no $b: cmake --build build"; done
bench_init raw redis-latency
start_origin

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --logfile "$out_dir/redis.log" & pids+=($!)
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

start_one() {  # start_one NAME STORE_YAML: sets port_NAME
  local name=$1 port admin
  port=$(free_port) admin=$(free_port)
  cat >"$tmp/$name.yaml" <<EOF
server: { listen: [127.0.0.1:$port], threads: 1 }
admin: { listen: 127.0.0.1:$admin, top: off }
log: { level: warn }
upstreams: { origin: { url: "http://127.0.0.1:$origin_port" } }
$2
routes:
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: ip, algorithm: token_bucket, capacity: 1000000000, refill_rate: 1000000000/s, key: [ip] }]
EOF
  "$fg_bin" --config "$tmp/$name.yaml" >"$out_dir/$name.log" 2>&1 & pids+=($!)
  wait_http "$!" 100 "http://127.0.0.1:$admin/readyz" || die "floodgate ($name) did not start"
  printf -v "port_$name" '%s' "$port"
}
start_one memory "store: { key_secret: latency-bench-secret-0123456789 }"
start_one redis "store: { backend: redis, redis: { address: \"127.0.0.1:$redis_port\" }, key_secret: latency-bench-secret-0123456789 }"

meta date "$(date -Is)"
meta host "$(uname -srm), $(nproc) cores"
meta client "$client_bin $n / (memory, redis interleaved), $runs runs"
printf 'run\tmemory_p50_us\tmemory_p90_us\tredis_p50_us\tredis_p90_us\tadded_p50_us\tping_us\tscript_us\tover_us\n' >"$out_dir/summary.tsv"
for run in $(seq "$runs"); do
  redis-cli -p "$redis_port" config resetstat >/dev/null
  "$client_bin" "$n" /x "$port_memory" "$port_redis" >"$out_dir/raw/run-$run.tsv"
  ping_ms=$(timeout 60 redis-benchmark -p "$redis_port" -c 1 -n 20000 -t ping -q 2>/dev/null |
    tr '\r' '\n' | sed -n 's/^PING_MBULK:.*p50=\([0-9.]*\) msec.*/\1/p')
  # the script's time inside Redis: FCALL (or EVALSHA, where functions are not allowed)
  script_us=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(fcall|evalsha):/ { n += $3; u += $5 } END { if (n) printf "%.2f", u / n }')
  python3 - "$out_dir/raw/run-$run.tsv" "$run" "$ping_ms" "${script_us:-0}" >>"$out_dir/summary.tsv" <<'PY'
import sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
mem, red = rows[0], rows[1]
added = float(red[1]) - float(mem[1])
ping = float(sys.argv[3]) * 1000
script = float(sys.argv[4])
print("\t".join([sys.argv[2], mem[1], mem[2], red[1], red[2], "%.1f" % added, "%.1f" % ping,
                 "%.1f" % script, "%.1f" % (added - ping - script)]))
PY
done
python3 - "$out_dir/summary.tsv" <<'PY' | tee "$out_dir/table.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("| run | memory p50 | redis p50 | added p50 | Redis PING | script in Redis | added - (PING + script) |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %s µs | %s µs | %s µs | %s µs | %s µs | %s µs |" % (
        r["run"], r["memory_p50_us"], r["redis_p50_us"], r["added_p50_us"], r["ping_us"],
        r["script_us"], r["over_us"]))
PY
note "results in $out_dir"
