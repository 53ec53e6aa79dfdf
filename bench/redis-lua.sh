#!/usr/bin/env bash
# What one decision costs Redis inside floodgate's function library, with the proxy out of the
# picture: a private redis-server, the library built from lua/ as CMake builds it, and
# redis-benchmark sending FCALLs of 1 and of 8 one-limit requests (a loop turn's batch), each
# a token bucket on its own key; Redis's own account of the time inside them (INFO
# commandstats, usec_per_call). With ../shared/bench present, the peer harness's plain Lua
# token bucket (EVALSHA, one decision per call) is measured in the same run for comparison.
#
#   bench/redis-lua.sh [ROUNDS]       # default 5 rounds, interleaved; medians
#
# Prints a table and writes it to docs/bench/redis-lua-table.txt. Needs redis-server,
# redis-cli and redis-benchmark (Redis 7: functions).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
for t in redis-server redis-cli redis-benchmark; do
  command -v "$t" >/dev/null || { echo "redis-lua.sh needs $t" >&2; exit 2; }
done
# shellcheck source=bench/lib.sh
source bench/lib.sh  # free_port
port=$(free_port)
dir=$(mktemp -d /tmp/floodgate-redis-lua.XXXXXX)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done

# The library as floodgate loads it (src/CMakeLists.txt joins the same files), under a bench
# name so that it never meets a real one.
{
  echo "#!lua name=floodgate_bench"
  cat lua/prelude.lua lua/clock.lua lua/acquire.lua lua/adjust.lua
  echo "redis.register_function('fg_acquire_bench', acquire)"
} >"$dir/library.lua"
cli function load replace "$(cat "$dir/library.lua")" >/dev/null

harness_sha=
if [[ -f ../shared/bench/lua/token_bucket.lua ]]; then
  harness_sha=$(cli script load "$(cat ../shared/bench/lua/token_bucket.lua)")
fi

# One request: its lease id, 1 item: token_bucket, capacity and rate 10^6 (nothing refused),
# window 0, cost 1, enforced, no holder.
item=(lease 1 0 1000000 1000000 0 1 1 "''")
fcall_args() { # fcall_args N: one FCALL of N requests on N keys
  local n=$1 keys=() args=()
  for i in $(seq "$n"); do keys+=("fg:bench:$i"); args+=("${item[@]}"); done
  echo FCALL fg_acquire_bench "$n" "${keys[@]}" "''" "${args[@]}"
}
# usec per call of COMMAND over 20,000 calls, 8 pipelined
measure() { # measure COMMAND ARGS...
  local cmd=$1
  shift
  cli flushall >/dev/null
  cli config resetstat >/dev/null
  eval "timeout 120 redis-benchmark -p $port -P 8 -n 20000 $*" >/dev/null 2>&1
  cli info commandstats | tr -d '\r' |
    awk -F'[:=,]' -v c="cmdstat_$cmd" '$1 == c { printf "%.2f", $5 / $3 }'
}

declare -A got
names=(fcall-1 fcall-8)
[[ -n $harness_sha ]] && names+=(harness-evalsha)
for _ in $(seq "$rounds"); do
  got[fcall-1]+=" $(measure fcall "$(fcall_args 1)")"
  got[fcall-8]+=" $(measure fcall "$(fcall_args 8)")"
  if [[ -n $harness_sha ]]; then
    got[harness-evalsha]+=" $(measure evalsha EVALSHA "$harness_sha" 1 tb:bench 1000000 1000000 1)"
  fi
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
{
  echo "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(date -u +%Y-%m-%d), $rounds rounds, medians (all values):"
  printf '%-18s %14s %17s   %s\n' call "us per call" "us per decision" "rounds"
  for n in "${names[@]}"; do
    m=$(median <<<"${got[$n]}")
    per=1
    [[ $n == fcall-8 ]] && per=8
    printf '%-18s %14s %17s  %s\n' "$n" "$m" "$(awk -v m="$m" -v p=$per 'BEGIN { printf "%.2f", m / p }')" "${got[$n]}"
  done
  echo "fcall-N: floodgate's library, one call of N one-limit requests (token bucket, own keys)"
  [[ -n $harness_sha ]] && echo "harness-evalsha: ../shared/bench/lua/token_bucket.lua, one decision per EVALSHA"
} | tee docs/bench/redis-lua-table.txt
