#!/usr/bin/env bash
# The main job, end to end: installs what is missing, builds, starts a demo origin on
# 127.0.0.1:9000 and floodgate (config/floodgate.yaml, embedded store) on 127.0.0.1:8080,
# sends traffic through it, prints what happened, and stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target floodgate floodgate-test-origin >/dev/null

for port in 8080 9000 9901; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo: port $port is already in use; stop whatever listens there first" >&2
    exit 1
  fi
done

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

build/floodgate-test-origin --port 9000 >/dev/null &
pids+=($!)
build/floodgate --check-config config/floodgate.yaml
build/floodgate --config config/floodgate.yaml 2>/tmp/floodgate-demo.log &
pids+=($!)
for _ in $(seq 50); do
  curl -s -o /dev/null http://127.0.0.1:8080/ && break
  sleep 0.1
done

echo
echo "== one request through floodgate (the origin echoes what it received) =="
curl -s -i http://127.0.0.1:8080/echo/hello
echo
echo
echo "== a burst of 30 requests to /api/items from one client (limit ip-burst: 10, refilling 5/s) =="
curl -s -o /dev/null http://127.0.0.1:9000/__reset
declare -A seen=()
for i in $(seq 30); do
  code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/api/items)
  seen[$code]=$(( ${seen[$code]:-0} + 1 ))
done
for code in $(printf '%s\n' "${!seen[@]}" | sort); do echo "  HTTP $code: ${seen[$code]}"; done
echo "  requests that reached the origin: $(curl -s http://127.0.0.1:9000/__stats | sed 's/.*"requests":\([0-9]*\).*/\1/')"
echo
echo "== the next refused request, as the client sees it =="
curl -s -i http://127.0.0.1:8080/api/items | tr -d '\r'
echo
echo "== after 1 s (5 tokens refilled), an admitted one =="
sleep 1
curl -s -i http://127.0.0.1:8080/api/items | tr -d '\r' | grep -iE '^(HTTP|x-ratelimit|ratelimit)'
echo
echo "== errors floodgate answers itself =="
printf '  oversized header: '; curl -s -o /dev/null -w '%{http_code}\n' -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" http://127.0.0.1:8080/
printf '  smuggling (CL+TE): '; curl -s -o /dev/null -w '%{http_code}\n' -X POST -H 'Content-Length: 4' -H 'Transfer-Encoding: chunked' --data-binary $'0\r\n\r\n' http://127.0.0.1:8080/
echo
echo "== who is calling hardest (admin listener: GET /top; the live page is GET /) =="
curl -s 'http://127.0.0.1:9901/top?limit=ip-burst&k=3'
echo
echo "floodgate log: /tmp/floodgate-demo.log"
