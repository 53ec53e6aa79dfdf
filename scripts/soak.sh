#!/usr/bin/env bash
# Fault soak (issue 8; a script, not a CI test): mixed load through floodgate for SOAK_SECONDS
# (default 600) while Redis is killed and restarted every minute and the origin is killed and
# restarted twice. Counted at the client (wrk, every status) and at the origin (a log of every
# request it saw; each request has a unique path): no crash, no request forwarded twice,
# every client request answered, and floodgate's RSS sampled every 10 s.
#
#   scripts/soak.sh [SECONDS]         # needs a build (cmake --build build), wrk, redis-server
#   (FLOODGATE_BIN / ORIGIN_BIN: other binaries than build/'s)
#
# Output: a summary on stdout and everything in $SOAK_OUT (default /tmp/floodgate-soak.XXXX).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${SOAK_SECONDS:-600}}
out=${SOAK_OUT:-$(mktemp -d /tmp/floodgate-soak.XXXXXX)}
mkdir -p "$out"
for tool in wrk redis-server curl python3; do
  command -v $tool >/dev/null || { echo "soak.sh needs $tool" >&2; exit 2; }
done
fg_bin=${FLOODGATE_BIN:-build/floodgate}
origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
[[ -x $fg_bin && -x $origin_bin ]] || { echo "build first (cmake --build build)" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export SOAK_PORT SOAK_ADMIN_PORT SOAK_REDIS_PORT SOAK_ORIGIN_PORT
SOAK_PORT=$(free_port) SOAK_ADMIN_PORT=$(free_port) SOAK_REDIS_PORT=$(free_port) SOAK_ORIGIN_PORT=$(free_port)

redis_pid= origin_pid= fg_pid= wrk_pid=
cleanup() {
  for p in $wrk_pid $fg_pid $origin_pid $redis_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
log() { echo "[soak $(date +%T)] $*" | tee -a "$out/events.txt"; }

start_redis() {
  redis-server --port "$SOAK_REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    >>"$out/redis.log" 2>&1 &
  redis_pid=$!
}
start_origin() {
  "$origin_bin" --port "$SOAK_ORIGIN_PORT" --log-targets "$out/origin-targets.txt" \
    >>"$out/origin.log" 2>&1 &
  origin_pid=$!
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$fg_pid/status"; }

: >"$out/origin-targets.txt"
start_redis
start_origin
sleep 0.5
"$fg_bin" --config scripts/soak/soak.yaml >"$out/floodgate.log" 2>&1 &
fg_pid=$!
for _ in $(seq 100); do curl -fso /dev/null "http://127.0.0.1:$SOAK_ADMIN_PORT/readyz" && break; sleep 0.1; done
log "floodgate pid $fg_pid on :$SOAK_PORT, redis :$SOAK_REDIS_PORT, origin :$SOAK_ORIGIN_PORT; $seconds s"

wrk -t2 -c32 -d"${seconds}s" --timeout 5s -s scripts/soak/load.lua "http://127.0.0.1:$SOAK_PORT" \
  >"$out/wrk.txt" 2>&1 &
wrk_pid=$!

start=$SECONDS
next_redis=60 origin_restarts=0 redis_restarts=0
: >"$out/rss.txt"
while kill -0 "$wrk_pid" 2>/dev/null; do
  sleep 10
  t=$((SECONDS - start))
  kill -0 "$fg_pid" 2>/dev/null || { log "floodgate died"; break; }
  echo "$t $(rss_kb)" >>"$out/rss.txt"
  if ((t >= next_redis && t < seconds - 5)); then
    kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
    sleep 1; start_redis; redis_restarts=$((redis_restarts + 1)); next_redis=$((next_redis + 60))
    log "redis killed and restarted ($redis_restarts)"
  fi
  if ((origin_restarts < 2 && t >= (origin_restarts + 1) * seconds / 3)); then
    kill -9 "$origin_pid"; wait "$origin_pid" 2>/dev/null || true
    sleep 1; start_origin; origin_restarts=$((origin_restarts + 1))
    log "origin killed and restarted ($origin_restarts)"
  fi
done
wait "$wrk_pid" || true
alive=no
kill -0 "$fg_pid" 2>/dev/null && alive=yes
final_rss=$(rss_kb 2>/dev/null || echo 0)
kill -TERM "$fg_pid"
fg_exit=0
wait "$fg_pid" || fg_exit=$?

{
  echo "== soak: $seconds s, redis restarted $redis_restarts times, origin $origin_restarts times =="
  grep -E "^client:|^status" "$out/wrk.txt"
  origin_total=$(wc -l <"$out/origin-targets.txt")
  dupes=$(sort "$out/origin-targets.txt" | uniq -d | wc -l)
  echo "origin: $origin_total requests seen, $dupes seen more than once"
  echo "floodgate: alive at the end: $alive; exit status after SIGTERM: $fg_exit; RSS KiB first/last sample: $(head -1 "$out/rss.txt" | cut -d' ' -f2) / $final_rss"
  echo "RSS samples (s KiB): $(tr '\n' ' ' <"$out/rss.txt")"
} | tee "$out/summary.txt"
echo "everything in $out"
