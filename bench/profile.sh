#!/usr/bin/env bash
# Where does floodgate's time go? Starts an origin, (Redis,) floodgate with one of
# bench/configs/*.yaml and drives it with wrk while a profiler watches floodgate only.
#
#   bench/profile.sh MODE [high|low] [perf|callgrind|cpu]
#     MODE      pass | memory | redis | redis3 | leased   (bench/configs/MODE.yaml)
#     high|low  limit per second: 1000000 (nothing refused) or 100 (~all answered 429)
#     perf      perf record -g on floodgate for the run, then the top of perf report
#     callgrind valgrind --tool=callgrind (instruction counts, repeatable; ~50x slower)
#     cpu       no profiler: req/s and floodgate CPU microseconds per request
#
# Needs wrk and (for the origin) nginx if installed, else build/floodgate-test-origin.
# Environment: DURATION (10), CONNS (64), FLOODGATE_BIN (build/floodgate), OUT (a new /tmp dir).
# Stand-alone: nothing here uses ../shared (that is bench/peers.sh's comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: bench/profile.sh MODE [high|low] [perf|callgrind|cpu]}
level=${2:-high}
tool=${3:-cpu}
bin=${FLOODGATE_BIN:-build/floodgate}
duration=${DURATION:-10}
conns=${CONNS:-64}
out=${OUT:-$(mktemp -d /tmp/floodgate-profile.XXXXXX)}
[[ -f bench/configs/$mode.yaml ]] || { echo "no bench/configs/$mode.yaml" >&2; exit 2; }
command -v wrk >/dev/null || { echo "profile.sh needs wrk (apt-get install wrk)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source bench/lib.sh  # free_port
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

export FG_PORT FG_ADMIN_PORT FG_ORIGIN_PORT FG_REDIS_PORT FG_LIMIT FG_LIMIT_MINUTE
FG_PORT=$(free_port) FG_ADMIN_PORT=$(free_port) FG_ORIGIN_PORT=$(free_port) FG_REDIS_PORT=$(free_port)
if [[ $level == low ]]; then FG_LIMIT=100; else FG_LIMIT=1000000; fi
FG_LIMIT_MINUTE=$((FG_LIMIT * 60))

if command -v nginx >/dev/null; then
  mkdir -p "$out/nginx"
  cat >"$out/nginx/nginx.conf" <<CONF
worker_processes auto;
pid $out/nginx/nginx.pid;
error_log $out/nginx/error.log crit;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $out/nginx; proxy_temp_path $out/nginx; fastcgi_temp_path $out/nginx;
  uwsgi_temp_path $out/nginx; scgi_temp_path $out/nginx;
  server { listen 127.0.0.1:$FG_ORIGIN_PORT; keepalive_requests 1000000; location / { return 200 "ok"; } }
}
CONF
  nginx -p "$out/nginx" -c "$out/nginx/nginx.conf" & pids+=($!)
else
  build/floodgate-test-origin --port "$FG_ORIGIN_PORT" >/dev/null & pids+=($!)
fi
redis_pid=
if [[ $mode == redis* || $mode == leased ]]; then
  redis-server --port "$FG_REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >"$out/redis.log" & pids+=($!)
  redis_pid=$!
fi
sleep 0.5

case $tool in
  callgrind) valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
               "$bin" --config "bench/configs/$mode.yaml" 2>"$out/valgrind.log" & ;;
  *) "$bin" --config "bench/configs/$mode.yaml" & ;;
esac
fg=$!; pids+=($fg)
for _ in $(seq 100); do curl -fso /dev/null "http://127.0.0.1:$FG_ADMIN_PORT/readyz" && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$FG_PORT/" || true)
echo "first request: $code"
[[ $code == 200 || $code == 429 ]] || { echo "floodgate did not answer" >&2; exit 1; }
wrk -t2 -c"$conns" -d2s "http://127.0.0.1:$FG_PORT/" >/dev/null  # warm-up

cpu_ticks() { awk '{print $14 + $15}' "/proc/${1:-$fg}/stat"; }
# Script calls (FCALL, EVALSHA, EVAL) Redis has run so far: with the CPU ticks, what one
# decision costs Redis and how many decisions share a call.
script_calls() { # "calls usec" of FCALL, EVALSHA and EVAL so far
  redis-cli -p "$FG_REDIS_PORT" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(fcall|evalsha|eval):/ { n += $3; u += $5 } END { print n + 0, u + 0 }'
}
before=$(cpu_ticks)
[[ -n $redis_pid ]] && redis_before=$(cpu_ticks "$redis_pid") && calls_before=$(script_calls)
if [[ $tool == perf ]]; then
  perf record -F 2999 -g -o "$out/perf.data" -p "$fg" -- sleep "$duration" 2>"$out/perf.log" &
  perfpid=$!
fi
wrk -t2 -c"$conns" -d"${duration}s" --latency "http://127.0.0.1:$FG_PORT/" | tee "$out/wrk.txt"
after=$(cpu_ticks)
[[ -n $redis_pid ]] && redis_after=$(cpu_ticks "$redis_pid") && calls_after=$(script_calls)
[[ $tool == perf ]] && wait "$perfpid"
reqs=$(awk '/requests in/ {print $1}' "$out/wrk.txt")
awk -v t=$((after - before)) -v r="$reqs" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "floodgate CPU: %.1f us per request (%d requests)\n", t / hz * 1e6 / r, r }'
if [[ -n $redis_pid ]]; then
  read -r c0 u0 <<<"$calls_before"
  read -r c1 u1 <<<"$calls_after"
  awk -v t=$((redis_after - redis_before)) -v c=$((c1 - c0)) -v u=$((u1 - u0)) -v r="$reqs" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN {
      printf "redis CPU: %.1f us per request, %.1f of them inside scripts; %d script calls, %.2f per request\n",
             t / hz * 1e6 / r, u / r, c, c / r }'
fi

case $tool in
  perf)
    perf report -i "$out/perf.data" --no-children --percent-limit 0.7 --stdio -g none 2>/dev/null \
      | grep -v '^#' | grep -v '^$' | head -60 | tee "$out/perf-top.txt" ;;
  callgrind)
    kill -TERM "$fg"; wait "$fg" 2>/dev/null || true
    callgrind_annotate "$out/callgrind.out" 2>/dev/null | head -60 | tee "$out/callgrind-top.txt" ;;
esac
echo "output kept in $out"
