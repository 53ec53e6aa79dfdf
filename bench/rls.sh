#!/usr/bin/env bash
# Envoy's rate limit service (issue 37's benchmark): ShouldRateLimit calls per second and
# their latency, decided on the embedded store and on Redis, against a no-op call on the same
# server in the same run: a call of a domain floodgate does not know, decoded and answered OK
# with nothing decided, which is what the gRPC transport itself costs.
#
#   bench/rls.sh [--dir DIR]      results in DIR (default a new /tmp directory): table.txt,
#                                 h2load/*.txt, the processes' logs
#
# Each call is the same prepared gRPC body (one descriptor, remote_address=10.0.0.1: one hot
# key, as the peer harness's rows) sent by `h2load -t1 -c$CONNS -m$STREAMS` on h2c with prior
# knowledge, as Envoy's gRPC client sends it (content-type application/grpc, te: trailers).
# The server has a core of its own: floodgate (`server.threads: 1`) pinned to CPU 1, h2load
# and redis-server to CPU 0 (taskset), so that the load generator never takes the server's
# time and a latency is the server's, not the scheduler's. A ratio of rates is the ratio of
# what the server can do only when both runs keep its core busy: the table gives the share of
# its core each used (one h2load thread tops out near 140 k calls/s here, about what a core
# of floodgate's no-op calls takes, so the no-op's rate is the less certain of the two). Per server (one on the embedded
# store, one on the private redis-server) and per round: the no-op call, then the decided
# one, each DURATION s after a WARMUP s run; then each at about half its measured rate for the
# p99 latency (h2load's per-request log; closed loop at the fewest connections and streams
# that reach half the rate: see half_p99). The limit is never reached: every call is decided
# and admitted.
# Ratios are within one round, then the median over rounds.
#
# Environment: DURATION (10), WARMUP (2), ROUNDS (3), CONNS (8), STREAMS (16),
# FLOODGATE_BIN (build/floodgate). Needs h2load (nghttp2-client), redis-server and Debian's
# /usr/bin/python3 with python3-grpc-tools (the body is built from tests/integration/rls's
# messages). Stand-alone: nothing here uses ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
out=''
case ${1:-} in
  --dir) out=${2:?--dir needs a directory} ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  '') ;;
  *) echo "rls.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
out=${out:-$(mktemp -d /tmp/floodgate-rls-bench.XXXXXX)}
mkdir -p "$out/h2load"
bin=${FLOODGATE_BIN:-build/floodgate}
duration=${DURATION:-10} warmup=${WARMUP:-2} rounds=${ROUNDS:-3}
conns=${CONNS:-8} streams=${STREAMS:-16}
for tool in h2load redis-server taskset; do
  command -v "$tool" >/dev/null || { echo "rls.sh needs $tool" >&2; exit 2; }
done
[[ -x $bin ]] || { echo "rls.sh: no $bin (build first)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source bench/lib.sh # free_port
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# The two bodies: a known domain (decided) and an unknown one (the no-op).
/usr/bin/python3 - "$out" <<'PY'
import importlib.util, struct, sys
out = sys.argv[1]
sys.argv = ["rls_peer.py", "call", "0", "{}"]
spec = importlib.util.spec_from_file_location("peer", "tests/integration/rls/rls_peer.py")
peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer)
for name, domain in (("decide", "edge"), ("noop", "none")):
    msg = peer.request_of({"domain": domain,
                           "descriptors": [{"entries": [["remote_address", "10.0.0.1"]]}]})
    data = msg.SerializeToString()
    open("%s/%s.body" % (out, name), "wb").write(b"\0" + struct.pack(">I", len(data)) + data)
PY

redis_port=$(free_port)
taskset -c 0 redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$out/redis.log" &
pids+=($!)
# floodgate NAME STORE_YAML: an instance serving only the RLS; prints its port.
start() {
  local name=$1 store=$2 port admin
  port=$(free_port) admin=$(free_port)
  cat >"$out/$name.yaml" <<YAML
server: { threads: 1 }
admin: { listen: "127.0.0.1:$admin" }
log: { level: warn }
$store
rls:
  listen: ["127.0.0.1:$port"]
  domains:
    - domain: edge
      descriptors:
        - match: [ { key: remote_address } ]
          limits: [ { name: per-ip, algorithm: token_bucket, capacity: 1000000000, refill_rate: 1000000000/s } ]
YAML
  taskset -c 1 "$bin" --config "$out/$name.yaml" >"$out/$name.log" 2>&1 &
  echo "$! $port $admin"
}
read -r mem_pid mem_port mem_admin < <(start memory "store: { key_secret: bench-secret-0123456789 }")
read -r redis_pid redis_fg_port redis_admin < <(start redis \
  "store: { backend: redis, redis: { address: \"127.0.0.1:$redis_port\" }, key_secret: bench-secret-0123456789 }")
pids+=("$mem_pid" "$redis_pid")  # started in the process substitutions' subshells

for a in "$mem_admin" "$redis_admin"; do
  for _ in $(seq 100); do curl -fso /dev/null "http://127.0.0.1:$a/readyz" && break; sleep 0.1; done
done

# Both calls answered as meant before anything is measured: OK, decided or not.
for port in "$mem_port" "$redis_fg_port"; do
  for domain in edge none; do
    answer=$(/usr/bin/python3 tests/integration/rls/rls_peer.py call "$port" \
      "{\"domain\":\"$domain\",\"descriptors\":[{\"entries\":[[\"remote_address\",\"10.0.0.1\"]]}]}")
    [[ $answer == *'"overall": "OK"'* ]] || { echo "rls.sh: $domain on $port: $answer" >&2; exit 1; }
  done
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# run NAME PORT BODY PID SECONDS CONNS STREAMS [log]: one h2load run, with its per-request
# log when asked (it slows h2load: not for the rate runs); prints "req/s cpu_us_per_call
# p99_ms errors" (p99 "-" without the log).
run() {
  local name=$1 port=$2 body=$3 pid=$4 seconds=$5 c=$6 m=$7 before after p99=- extra=()
  rm -f "$out/h2load/$name.log"  # h2load appends to a log file
  [[ ${8:-} == log ]] && extra=(--log-file="$out/h2load/$name.log")
  before=$(cpu_ticks "$pid")
  taskset -c 0 h2load -t1 -c"$c" -m"$m" -D"$seconds" -d "$out/$body.body" \
    -H 'content-type: application/grpc' -H 'te: trailers' "${extra[@]}" \
    "http://127.0.0.1:$port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
    >"$out/h2load/$name.txt" 2>&1
  after=$(cpu_ticks "$pid")
  [[ ${8:-} == log ]] && p99=$(cut -f3 "$out/h2load/$name.log" | sort -n |
    awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; if (NR) printf "%.3f", v[i] / 1000; else print "-" }')
  awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v p99="$p99" '
    /finished in/ { for (i = 1; i <= NF; i++) if ($i == "req/s,") rps = $(i - 1) }
    /^requests:/ { done = $8 + 0; failed = $10 + 0 }
    /^status codes:/ { ok = $3 + 0 }
    END { printf "%.0f %.1f %s %d\n", rps, (done > 0 ? t / hz * 1e6 / done : 0), p99, failed + (done - ok) }
  ' "$out/h2load/$name.txt"
}

# The latency at half the maximum rate, in a closed loop: the fewest connections and streams
# of LEVELS whose rate (a WARMUP-long probe each) reaches half of `max`, then measured for
# DURATION. Not h2load's --rps: its rate mode counts a request's time from the slot its timer
# gave it, and said 0.7 ms at the median at 6 % of the maximum rate on this machine, where one
# call at a time takes 56 us. Prints "p99_ms rate_share level errors".
levels=("1 1" "2 1" "4 1" "4 2" "4 4" "8 4" "8 8" "8 16")
half_p99() {
  local name=$1 port=$2 body=$3 pid=$4 max=$5 level c m rps p99 err
  for level in "${levels[@]}"; do
    read -r c m <<<"$level"
    read -r rps _ _ _ < <(run "$name-probe-$c-$m" "$port" "$body" "$pid" "$warmup" "$c" "$m")
    ((rps * 2 >= max)) && break
  done
  read -r rps _ p99 err < <(run "$name" "$port" "$body" "$pid" "$duration" "$c" "$m" log)
  awk -v p="$p99" -v r="$rps" -v x="$max" -v l="c${c}m$m" -v e="$err" \
    'BEGIN { printf "%s %.2f %s %d\n", p, r / x, l, e }'
}

: >"$out/results.tsv"
for ((r = 1; r <= rounds; r++)); do
  for server in memory redis; do
    pid_var=${server/memory/mem}_pid port_var=${server/memory/mem}_port
    [[ $server == redis ]] && pid_var=redis_pid port_var=redis_fg_port
    pid=${!pid_var} port=${!port_var}
    for body in noop decide; do
      run "warm-$server-$body-$r" "$port" "$body" "$pid" "$warmup" "$conns" "$streams" >/dev/null
      read -r rps cpu _ err < <(run "$server-$body-$r" "$port" "$body" "$pid" "$duration" \
        "$conns" "$streams")
      read -r p99 share level err2 < <(half_p99 "$server-$body-$r-half" "$port" "$body" "$pid" "$rps")
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$server" "$body" "$rps" "$cpu" "$p99" \
        "$share" "$level" "$((err + err2))" | tee -a "$out/results.tsv"
    done
  done
done

python3 - "$out" <<'PY' | tee "$out/table.txt"
import statistics, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(out + "/results.tsv") if l.strip()]
by = {}
for r, server, body, rps, cpu, p99, share, level, err in rows:
    by[(r, server, body)] = (float(rps), float(cpu), p99, int(err), float(share), level)
print("| store | no-op calls/s | decided calls/s | decided / no-op (range) | CPU us per call no-op / decided (share of the core) | p99 ms at half rate, no-op / decided (rate reached, level) | errors |")
print("|---|---:|---:|---:|---:|---:|---:|")
for server in ("memory", "redis"):
    rounds = sorted({k[0] for k in by if k[1] == server})
    ratios = [by[(r, server, "decide")][0] / by[(r, server, "noop")][0] for r in rounds]
    med = lambda i, b: statistics.median(by[(r, server, b)][i] for r in rounds)
    p99 = lambda b: statistics.median(float(by[(r, server, b)][2]) for r in rounds
                                      if by[(r, server, b)][2] != "-")
    errs = sum(by[(r, server, b)][3] for r in rounds for b in ("noop", "decide"))
    level = lambda b: "/".join(sorted({by[(r, server, b)][5] for r in rounds}))
    busy = lambda b: med(0, b) * med(1, b) / 1e6
    print("| %s | %.0f | %.0f | **%.2f** (%.2f-%.2f) | %.1f / %.1f (%.2f / %.2f) | %.3f / **%.3f** (%.2f / %.2f of the maximum, %s / %s) | %d |" % (
        "embedded" if server == "memory" else "Redis", med(0, "noop"), med(0, "decide"),
        statistics.median(ratios), min(ratios), max(ratios), med(1, "noop"), med(1, "decide"),
        busy("noop"), busy("decide"), p99("noop"), p99("decide"), med(4, "noop"), med(4, "decide"), level("noop"),
        level("decide"), errs))
PY
echo "rls.sh: results in $out"
