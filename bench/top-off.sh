#!/usr/bin/env bash
# top-off.sh PORT ORIGIN_PORT LIMIT
# floodgate as the peer harness's `memory` row runs it (a token bucket per client IP on the
# embedded store, 2 threads, admin listener on PORT+1000), but with `admin.top: off`: the
# baseline bench/top.sh compares fg-mem (top on, the default) with. Stays in the foreground.
set -euo pipefail
if (($# != 3)); then sed -n '2,5p' "$0" >&2; exit 2; fi
port=$1 origin_port=$2 limit=$3
conf=${FLOODGATE_CONF:-$(mktemp "${TMPDIR:-/tmp}/floodgate-top-off.XXXXXX.yaml")}
cat >"$conf" <<YAML
# top-off.sh $port $origin_port $limit
server:
  listen: ["127.0.0.1:$port"]
  threads: 2
admin:
  listen: 127.0.0.1:$((port + 1000))
  top: off
log: { level: warn, access_log: false }
upstreams:
  origin: { url: "http://127.0.0.1:$origin_port", max_idle_connections: 256 }
store: { backend: memory }
routes:
  - name: bench
    match: { path_prefix: / }
    upstream: origin
    on_store_error: fail_closed
    limits:
      - { name: ip-bucket, algorithm: token_bucket, capacity: $limit, refill_rate: $limit/s, key: [ip] }
YAML
exec "${FLOODGATE_BIN:-build/floodgate}" --config "$conf"
