#!/usr/bin/env bash
# The speed guard: nginx and floodgate side by side on the request path's four ways, in a few
# minutes, each ratio and CPU per request printed next to the figure docs/benchmarks.md
# records for it (section "The guard"). Run it before closing anything on the request path and
# quote its output; a landing that moves a figure updates the recorded one and adds a row to
# that section's history.
#
#   bench/guard.sh [--dir DIR]      measure (results kept in DIR, else a new /tmp directory)
#   bench/guard.sh --report DIR     print an earlier run's table again (nothing measured)
#
# Paths (wrk -t2 -c64, nginx and floodgate alternating, ROUNDS rounds of DURATION seconds,
# medians; both proxies with 2 workers in front of one nginx origin answering "ok"):
#   pass     no limit: nginx proxy_pass (upstream keepalive) / floodgate bench/configs/pass.yaml
#   memory   one token bucket per client on the embedded store that never refuses (floodgate
#            bench/configs/memory.yaml); nginx's row is its plain proxy_pass, so the ratio
#            says what a decision costs over nginx forwarding; memory/pass is floodgate's own
#   429      nearly every request refused: nginx limit_req 100r/s nodelay / floodgate's
#            bucket at 100/s (the 429 path: a deny-cache hit to bytes on the wire)
#   h2       HTTP/2 over TLS, one stream per connection (bench/h2.sh's "pass")
# Environment: DURATION (5), ROUNDS (3), FLOODGATE_BIN (build/floodgate), SKIP_H2=1.
# Needs nginx, wrk, h2load, curl, openssl. Stand-alone: nothing here uses ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
out='' report_only=0
case ${1:-} in
  --dir) out=${2:?--dir needs a directory} ;;
  --report) out=${2:?--report needs a directory}; report_only=1 ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  '') ;;
  *) echo "guard.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
out=${out:-$(mktemp -d /tmp/floodgate-guard.XXXXXX)}
mkdir -p "$out"
bin=${FLOODGATE_BIN:-build/floodgate}
duration=${DURATION:-5}
rounds=${ROUNDS:-3}
if ((report_only == 0)); then
for tool in nginx wrk curl; do
  command -v "$tool" >/dev/null || { echo "guard.sh needs $tool (apt-get install nginx wrk curl)" >&2; exit 2; }
done
[[ -x $bin ]] || { echo "guard.sh: no $bin (build first)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source bench/lib.sh # free_port
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# nginx NAME PORT [LIMIT_ZONE LIMIT_REQ]: a proxy (or with PORT=origin, the origin).
nginx_conf() {
  local name=$1 body=$2 head=${3:-}
  mkdir -p "$out/$name"
  cat >"$out/$name/nginx.conf" <<CONF
worker_processes 2; pid $out/$name/nginx.pid; error_log $out/$name/error.log crit; daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $out/$name; proxy_temp_path $out/$name; fastcgi_temp_path $out/$name;
  uwsgi_temp_path $out/$name; scgi_temp_path $out/$name;
  $head
  $body
}
CONF
  env -u NGINX nginx -p "$out/$name" -c "$out/$name/nginx.conf" &
  pids+=($!)
  echo $! >"$out/$name/pid"
}
origin_port=$(free_port)
nginx_conf origin "server { listen 127.0.0.1:$origin_port; keepalive_requests 1000000; location / { return 200 \"ok\"; } }"
proxy_body() { # PORT [LIMIT_REQ]
  echo "upstream o { server 127.0.0.1:$origin_port; keepalive 256; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$1; keepalive_requests 1000000;
    location / { ${2:-} proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
}
nginx_pass=$(free_port) nginx_429=$(free_port)
nginx_conf nginx-pass "$(proxy_body "$nginx_pass")"
nginx_conf nginx-429 "$(proxy_body "$nginx_429" "limit_req zone=rl nodelay; limit_req_status 429;")" \
  "limit_req_zone \$binary_remote_addr zone=rl:10m rate=100r/s;"

# floodgate NAME CONFIG LIMIT: one instance on its own port.
floodgate() {
  local name=$1 config=$2 limit=$3 port
  port=$(free_port)
  FG_PORT=$port FG_ADMIN_PORT=$(free_port) FG_ORIGIN_PORT=$origin_port FG_REDIS_PORT=$(free_port) \
    FG_LIMIT=$limit FG_LIMIT_MINUTE=$((limit * 60)) "$bin" --config "bench/configs/$config.yaml" \
    >"$out/$name.log" 2>&1 &
  pids+=($!)
  echo "$! $port" >"$out/$name.proc"
}
floodgate fg-pass pass 1000000
floodgate fg-memory memory 1000000
floodgate fg-429 memory 100

port_of() { case $1 in nginx-pass) echo "$nginx_pass" ;; nginx-429) echo "$nginx_429" ;; *) cut -d' ' -f2 "$out/$1.proc" ;; esac; }
ticks() { # CPU ticks of a target: nginx's workers, or floodgate's process
  local t=0 c
  case $1 in
    nginx-*) for c in $(pgrep -P "$(cat "$out/$1/pid")"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$c/stat"))); done ;;
    *) t=$(awk '{print $14 + $15}' "/proc/$(cut -d' ' -f1 "$out/$1.proc")/stat") ;;
  esac
  echo "$t"
}
for t in nginx-pass nginx-429 fg-pass fg-memory fg-429; do
  for _ in $(seq 100); do curl -so /dev/null "http://127.0.0.1:$(port_of "$t")/" && break; sleep 0.1; done
done

hz=$(getconf CLK_TCK)
: >"$out/rows.tsv"
measure() { # TARGET ROUND: a line "target round req/s us/req non2xx%" in rows.tsv
  local t=$1 port before after res reqs
  port=$(port_of "$t")
  wrk -t2 -c64 -d1s "http://127.0.0.1:$port/" >/dev/null  # warm-up
  before=$(ticks "$t")
  res=$(wrk -t2 -c64 -d"${duration}s" "http://127.0.0.1:$port/")
  after=$(ticks "$t")
  reqs=$(awk '/requests in/ {print $1}' <<<"$res")
  awk -v t="$t" -v r="$2" -v n="$reqs" -v d=$((after - before)) -v hz="$hz" \
    -v rps="$(awk '/Requests\/sec/ {print $2}' <<<"$res")" \
    -v non="$(awk '/Non-2xx/ {print $5}' <<<"$res")" \
    'BEGIN { printf "%s\t%d\t%.0f\t%.1f\t%.1f\n", t, r, rps, d / hz * 1e6 / n, 100 * (non + 0) / n }' \
    >>"$out/rows.tsv"
}
echo "guard: $rounds rounds of ${duration}s per target (results in $out)" >&2
for r in $(seq "$rounds"); do
  # who goes first alternates by round
  if ((r % 2)); then order="nginx-pass fg-pass fg-memory nginx-429 fg-429"; else order="fg-429 nginx-429 fg-memory fg-pass nginx-pass"; fi
  for t in $order; do measure "$t" "$r"; done
done

if [[ ${SKIP_H2:-0} != 1 ]] && command -v h2load >/dev/null; then
  echo "guard: HTTP/2 (bench/h2.sh pass, $rounds rounds of ${duration}s)" >&2
  SCENARIOS=pass DURATION=$duration ROUNDS=$rounds WARMUP=1 FLOODGATE_BIN=$bin \
    bench/h2.sh --dir "$out/h2" >"$out/h2.log" 2>&1 || echo "guard: bench/h2.sh failed (see $out/h2.log)" >&2
fi

fi  # measuring

# The recorded figures: the table after "<!-- guard-figures -->" in docs/benchmarks.md,
# "| path | req/s ratio | floodgate us/req | nginx us/req |" per path.
python3 - "$out" docs/benchmarks.md <<'PY'
import csv, os, statistics, sys
out = sys.argv[1]
rec, on = {}, False
for l in open(sys.argv[2]):
    on = on or l.startswith("<!-- guard-figures -->")
    cells = [c.strip() for c in l.strip().strip("|").split("|")]
    if on and l.startswith("|") and len(cells) >= 4 and cells[0] not in ("path", "---"):
        rec[cells[0]], rec[cells[0] + "_fg"], rec[cells[0] + "_ng"] = cells[1], cells[2], cells[3]
    if on and not l.strip() and rec:
        break
rows = {}
for t, r, rps, us, non in csv.reader(open(os.path.join(out, "rows.tsv")), delimiter="\t"):
    rows.setdefault(t, {})[int(r)] = (float(rps), float(us), float(non))
def pair(a, b):  # median over rounds of a/b req/s, and the two median CPU figures
    ratios = [rows[a][r][0] / rows[b][r][0] for r in rows[a] if r in rows[b] and rows[b][r][0]]
    return (statistics.median(ratios), min(ratios), max(ratios),
            statistics.median(v[1] for v in rows[a].values()),
            statistics.median(v[1] for v in rows[b].values()))
lines = []
def line(name, what, a, b, key):
    ratio, lo, hi, us_a, us_b = pair(a, b)
    lines.append((name, what, f"{ratio:.3f} ({lo:.2f}-{hi:.2f})", rec.get(key, "") or "-",
                  f"{us_a:.1f}", rec.get(key + "_fg", "") or "-", f"{us_b:.1f}",
                  rec.get(key + "_ng", "") or "-"))
line("pass", "floodgate / nginx proxy_pass", "fg-pass", "nginx-pass", "pass")
line("memory", "floodgate bucket / nginx proxy_pass", "fg-memory", "nginx-pass", "memory")
line("memory/pass", "floodgate bucket / own pass-through", "fg-memory", "fg-pass", "memory/pass")
line("429", "floodgate 429 / nginx limit_req 429", "fg-429", "nginx-429", "429")
refused = statistics.median(v[2] for v in rows["fg-429"].values())
h2 = os.path.join(out, "h2", "summary.tsv")
if os.path.exists(h2):
    for s in csv.DictReader(open(h2), delimiter="\t"):
        if s["scenario"] == "pass":
            lines.append(("h2", "HTTP/2 TLS, 1 stream a connection",
                          f"{float(s['ratio_req_s']):.3f} ({float(s['ratio_req_s_min']):.2f}-{float(s['ratio_req_s_max']):.2f})",
                          rec.get("h2") or "-", f"{float(s['floodgate_proxy_us_req']):.1f}",
                          rec.get("h2_fg") or "-", f"{float(s['nginx_proxy_us_req']):.1f}",
                          rec.get("h2_ng") or "-"))
head = ("path", "what", "req/s ratio (range)", "recorded", "fg us/req", "recorded",
        "nginx us/req", "recorded")
widths = [max(len(str(r[i])) for r in lines + [head]) for i in range(len(head))]
for r in [head] + lines:
    print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
print(f"\nfloodgate's 429 row: {refused:.1f} % of answers were 429 (a 429 path needs ~100)")
print("us/req: the proxy's own user+system CPU per request; the ratio's range is over rounds.")
PY
