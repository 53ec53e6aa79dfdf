#!/usr/bin/env bash
# floodgate's TLS termination against nginx's, same certificate, same origin, one run.
#
#   bench/tls.sh [--dir DIR] [--out FILE.md] [--nginx-only]
#     --dir DIR      results directory (default /tmp/floodgate-tls-bench/<timestamp>):
#                    results.tsv (one line per wrk run), summary.tsv, table.txt, meta.txt,
#                    wrk/*.txt (raw wrk output), nginx.conf and the three processes' logs
#     --out FILE     also write a markdown snippet (table + run details) for docs/benchmarks.md
#     --nginx-only   measure nginx alone (same as FG_SKIP=1): no ratios
#
# Environment: DURATION (10 s per wrk run), ROUNDS (3), CONNS (64), WRK_THREADS (2),
#   THREADS (2: floodgate's server.threads and nginx's worker_processes), WARMUP (2 s),
#   URL_PATH (/: the origin's 2-byte "ok"), SCENARIOS ("http-ka tls-ka tls-full tls-resume"),
#   FG_SKIP=1, FLOODGATE_BIN (build/floodgate), ORIGIN_BIN (build/floodgate-test-origin),
#   NGINX_BIN (nginx), NGINX_REUSEPORT (0; 1 adds `reuseport`, floodgate's SO_REUSEPORT model),
#   VERIFY (1: check what wrk's handshakes are, on nginx, before measuring),
#   BUSY_PATTERN ('cc1plus|ninja|integration_tests|unit_tests|micro_bench': wait while such a
#   process runs, a build or the tests; '' to not check),
#   BUSY_WAIT (900: seconds of waiting for that in the whole run, then measure anyway and mark
#   the rows taken next to it noisy).
#
# Scenarios, each `wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency`, nginx and floodgate
# alternating (who goes first alternates by round), ROUNDS rounds:
#   http-ka     plain HTTP, keep-alive (the baseline: what TLS adds is the difference)
#   tls-ka      TLS, keep-alive: one handshake per connection, then only record encryption
#   tls-full    TLS, `Connection: close`: a new TCP connection and a FULL handshake per
#               request (wrk would resume the previous connection's session; a preloaded
#               SSL_connect wrapper, compiled here with cc, makes it start each one afresh)
#   tls-resume  TLS, `Connection: close`, wrk as it is: a new connection per request that
#               resumes the session (TLS 1.3 PSK with a fresh key exchange, no certificate
#               signature) if the server issued a ticket
# In the Connection: close rows req/s = handshakes/s; wrk's latency there starts once the
# handshake is done (it times request to response), so p99 is not the handshake's latency.
# Ratios are floodgate / nginx, divided within each round, then the median over rounds.
# "CPU us/req" is the proxy's own user+system time per request (nginx: master + workers).
#
# nginx: worker_processes $THREADS; listen ssl (TLSv1.2 TLSv1.3, the certificate, ciphers and
# curves at nginx's defaults); ssl_session_cache none + ssl_session_tickets on (nginx's
# defaults: no server-side session store, resumption by tickets only); keepalive_requests
# 1000000 (the default 1000 would close wrk's keep-alive connections mid-run); upstream
# keepalive 64, proxy_http_version 1.1, Connection "". floodgate: bench/configs/tls.yaml.
#
# Stand-alone: nothing here uses ../shared. Keep the machine otherwise idle.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
repo=$PWD
# shellcheck source=bench/lib.sh
source bench/lib.sh

bench_args "$@"

duration=${DURATION:-10}
rounds=${ROUNDS:-3}
conns=${CONNS:-64}
wrk_threads=${WRK_THREADS:-2}
threads=${THREADS:-2}
warmup=${WARMUP:-2}
url_path=${URL_PATH:-/}
scenarios=${SCENARIOS:-"http-ka tls-ka tls-full tls-resume"}
fg_bin=${FLOODGATE_BIN:-build/floodgate}
origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
nginx_bin=${NGINX_BIN:-nginx}
verify=${VERIFY:-1}
busy_pattern=${BUSY_PATTERN-cc1plus|ninja|integration_tests|unit_tests|micro_bench}
busy_wait=${BUSY_WAIT:-900}
out_dir=${out_dir:-/tmp/floodgate-tls-bench/$(date +%Y%m%d-%H%M%S)}

read -ra scen_list <<<"$scenarios"
for s in "${scen_list[@]}"; do
  case $s in http-ka|tls-ka|tls-full|tls-resume) ;; *) die "unknown scenario $s" ;; esac
done
has_scenario() { [[ " ${scen_list[*]} " == *" $1 "* ]]; }
need_tools wrk openssl curl python3 timeout "$nginx_bin"
[[ $(ldd "$(command -v wrk)" 2>/dev/null) == *libssl* ]] || die "this wrk has no TLS (not linked with libssl)"
check_binaries

bench_init wrk floodgate-tls
wait_idle || true

make_cert   # the same for both servers

# --- full-handshake wrapper for wrk -------------------------------------------------------
# wrk keeps one SSL object per connection slot and, after a close, SSL_clear() keeps its
# session, so its next SSL_connect resumes. Dropping the session before a handshake starts
# makes every connection a full handshake; nothing else in wrk changes.
full_hs_lib=
if has_scenario tls-full; then
  cat >"$tmp/full_handshake.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;
int SSL_set_session(SSL *s, SSL_SESSION *session);
int SSL_in_before(const SSL *s);
/* wrk calls SSL_connect again after WANT_READ/WANT_WRITE: only a handshake that has not
   started yet loses its session. */
int SSL_connect(SSL *s) {
  static int (*real)(SSL *);
  if (!real) real = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_connect");
  if (SSL_in_before(s)) SSL_set_session(s, NULL);
  return real(s);
}
C
  if command -v cc >/dev/null &&
     cc -O2 -shared -fPIC -o "$tmp/full_handshake.so" "$tmp/full_handshake.c" -ldl 2>"$tmp/cc.log"; then
    full_hs_lib=$tmp/full_handshake.so
  else
    note "cannot build the full-handshake wrapper (needs cc); skipping tls-full"
    kept=()
    for s in "${scen_list[@]}"; do [[ $s == tls-full ]] || kept+=("$s"); done
    scen_list=("${kept[@]}")
  fi
fi

start_origin  # the shared backend

# --- floodgate ----------------------------------------------------------------------------
declare -A tls_port plain_port proc_pid
servers=()
if [[ $fg_skip == 0 ]]; then
  floodgate_env
  export FG_PORT  # the plain-HTTP listener
  FG_PORT=$(free_port)
  if ! start_floodgate bench/configs/tls.yaml; then
    if grep -q "TLS termination is not available" "$out_dir/floodgate.log"; then
      echo "tls.sh: $fg_bin has no TLS termination yet; it says:" >&2
      sed 's/^/    /' "$out_dir/floodgate.log" >&2
      echo "tls.sh: build floodgate with TLS termination, or run FG_SKIP=1 bench/tls.sh (nginx alone)" >&2
      exit 3
    fi
    floodgate_not_ready
  fi
  tls_port[floodgate]=$FG_TLS_PORT plain_port[floodgate]=$FG_PORT proc_pid[floodgate]=$fg_pid
  servers+=(floodgate)
fi

# --- nginx ----------------------------------------------------------------------------------
nginx_dir
ng_tls=$(free_port) ng_plain=$(free_port) ng_verify=$(free_port)
# server_block PORT_TLS PORT_PLAIN|"" ACCESS_LOG
server_block() {
  local plain=
  [[ -n $2 ]] && plain="listen 127.0.0.1:$2 backlog=4096$reuseport;"
  cat <<BLOCK
  server {
    listen 127.0.0.1:$1 ssl backlog=4096$reuseport;
    $plain
    access_log $3;
    ssl_certificate     $cert;
    ssl_certificate_key $key;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache none;
    ssl_session_tickets on;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
BLOCK
}
{
  nginx_conf_start "bench/tls.sh: nginx terminating TLS in front of the test origin"
  cat <<CONF
  log_format verify '\$connection \$connection_requests \$ssl_session_reused \$ssl_protocol \$ssl_cipher \$ssl_curve';
  upstream origin {
    server 127.0.0.1:$origin_port;
    keepalive 64;
    keepalive_requests 1000000;
  }
CONF
  server_block "$ng_tls" "$ng_plain" off
  # Used only by the check before measuring (VERIFY): the same, with an access log.
  server_block "$ng_verify" "" "$ng/verify.log verify"
  echo "}"
} >"$ng/nginx.conf"
start_nginx "http://127.0.0.1:$ng_plain$url_path"
tls_port[nginx]=$ng_tls plain_port[nginx]=$ng_plain proc_pid[nginx]=$ng_pid
servers=(nginx "${servers[@]}")

# --- checks: the certificate is served, Connection: close is honoured, TLS parameters -------
declare -A tls_params resumes_of
request=$'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'
for s in "${servers[@]}"; do
  port=${tls_port[$s]}
  # --cacert: the server must present our certificate, valid for 127.0.0.1
  body=$(curl -fsS --max-time 5 --cacert "$cert" "https://127.0.0.1:$port$url_path") ||
    die "$s: https://127.0.0.1:$port$url_path failed (certificate or proxying)"
  [[ $url_path != / || $body == ok ]] || die "$s: unexpected body through TLS: $body"
  curl -fsS --max-time 5 -o /dev/null "http://127.0.0.1:${plain_port[$s]}$url_path" || die "$s: plain HTTP failed"
  # wrk reconnects after a response only when that response says Connection: close
  # (--http1.1: as wrk, which offers no ALPN; floodgate's TLS listener would pick h2 for curl)
  curl --http1.1 -fsS --max-time 5 -o /dev/null -D "$tmp/headers" --cacert "$cert" -H 'Connection: close' \
    "https://127.0.0.1:$port$url_path" || die "$s: a request with Connection: close failed"
  grep -qi '^connection: *close' "$tmp/headers" ||
    die "$s does not answer 'Connection: close' to Connection: close; the handshake rows would be wrong"
  first=$(printf '%s' "$request" | timeout 10 openssl s_client -connect "127.0.0.1:$port" \
            -sess_out "$tmp/sess-$s.pem" -ign_eof 2>&1 || true)
  second=$(printf '%s' "$request" | timeout 10 openssl s_client -connect "127.0.0.1:$port" \
             -sess_in "$tmp/sess-$s.pem" -ign_eof 2>&1 || true)
  proto=$(sed -n 's/^New, \([^,]*\), Cipher is \(.*\)/\1 \2/p' <<<"$first" | head -n1)
  group=$(sed -n 's/^Server Temp Key: \([^,]*\).*/\1/p' <<<"$first" | head -n1)
  sig=$(sed -n 's/^Peer signature type: //p' <<<"$first" | head -n1)
  if grep -q '^Reused,' <<<"$second"; then resumed=yes; else resumed=no; fi
  tls_params[$s]="${proto:-?} ${group:-?} ${sig:-?}"
  resumes_of[$s]=$resumed
  meta "tls_$s" "${tls_params[$s]}"
  meta "resumes_$s" "$resumed"
  note "$s: ${proto:-?}, key exchange ${group:-?}, signature ${sig:-?}; resumes a session: $resumed"
done
if [[ $fg_skip == 0 ]]; then
  [[ ${tls_params[nginx]} == "${tls_params[floodgate]}" ]] ||
    note "WARNING: nginx and floodgate negotiate different TLS parameters (see $meta_file)"
  [[ ${resumes_of[nginx]} == "${resumes_of[floodgate]}" ]] ||
    note "WARNING: only one of them resumes sessions: tls-resume compares unlike handshakes"
fi

# What wrk does with Connection: close, seen from nginx's access log on the verify server:
# one request per connection, and how many handshakes resumed.
if [[ $verify == 1 ]]; then
  for mode in tls-full tls-resume; do
    has_scenario "$mode" || continue
    : >"$ng/verify.log"   # nginx appends (O_APPEND): truncating is enough
    pre=()
    [[ $mode == tls-full ]] && pre=(env "LD_PRELOAD=$full_hs_lib")
    run_load timeout -k 5 30 "${pre[@]}" wrk -t"$wrk_threads" -c"$conns" -d2s -H 'Connection: close' \
      "https://127.0.0.1:$ng_verify$url_path" >"$out_dir/wrk/verify-$mode.txt" ||
      die "wrk failed (see $out_dir/wrk/verify-$mode.txt)"
    sleep 0.5
    line=$(awk '{ n++; conn[$1] = 1; if ($2 != 1) multi++; if ($3 == "r") reused++ }
                END { c = 0; for (k in conn) c++;
                      printf "%d requests on %d connections, %d on a reused connection, %.1f %% resumed handshakes",
                             n, c, multi, n ? 100 * reused / n : 0 }' "$ng/verify.log")
    meta "verify_$mode" "$line"
    note "wrk $mode against nginx: $line"
  done
fi

# --- measurement -----------------------------------------------------------------------------
to_ms() { awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
  if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000;
  printf "%.3f", n }'; }

# run_wrk SERVER SCENARIO SECONDS OUTFILE
run_wrk() {
  local s=$1 sc=$2 secs=$3 file=$4 url pre=() hdr=()
  case $sc in
    http-ka) url=http://127.0.0.1:${plain_port[$s]}$url_path ;;
    tls-ka) url=https://127.0.0.1:${tls_port[$s]}$url_path ;;
    tls-full) url=https://127.0.0.1:${tls_port[$s]}$url_path; hdr=(-H 'Connection: close')
              pre=(env "LD_PRELOAD=$full_hs_lib") ;;
    tls-resume) url=https://127.0.0.1:${tls_port[$s]}$url_path; hdr=(-H 'Connection: close') ;;
  esac
  run_load timeout -k 5 $((secs + 30)) "${pre[@]}" wrk -t"$wrk_threads" -c"$conns" -d"${secs}s" --latency \
    "${hdr[@]}" "$url" >"$file" 2>&1 || note "wrk exited with $? ($s $sc, see $file)"
}

results=$out_dir/results.tsv
printf 'round\tserver\tscenario\treq_s\tp50_ms\tp99_ms\trequests\tsocket_errors\tnon2xx\tproxy_us_req\torigin_cpu_pct\tnoisy\n' >"$results"
measure() {  # ROUND SERVER SCENARIO
  local r=$1 s=$2 sc=$3 file
  file=$out_dir/wrk/r$r-$s-$sc.txt
  timed_run "${proc_pid[$s]}" run_wrk "$s" "$sc" "$duration" "$file"
  local noisy=$run_noisy rps p50 p99 reqs errs non2xx
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$file")
  reqs=$(awk '/ requests in / { print $1 }' "$file")
  p50=$(awk '$1 == "50%" { print $2 }' "$file")
  p99=$(awk '$1 == "99%" { print $2 }' "$file")
  errs=$(awk '/Socket errors:/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$file")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' "$file")
  [[ -n $rps && -n $p99 ]] || { note "no result from wrk for $s $sc (see $file)"; rps=0 reqs=0 p50=0 p99=0; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$sc" "$rps" \
    "$(to_ms "$p50")" "$(to_ms "$p99")" "$reqs" "${errs:-0}" "${non2xx:-0}" \
    "$(proxy_us_per_req "$reqs")" "$(origin_cpu_pct)" "$noisy" >>"$results"
  local flag=
  ((noisy)) && flag='  (noisy: a build or tests ran)'
  printf '  round %s  %-9s %-10s %10s req/s  p99 %8s ms  errors %s%s\n' "$r" "$s" "$sc" "$rps" \
    "$(to_ms "$p99")" "${errs:-0}" "$flag"
}

meta_host
meta versions "$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), $(wrk -v 2>&1 | head -n1 | awk '{print $2}'), $(openssl version | awk '{print $1 " " $2}')"
meta_floodgate
meta wrk "-t$wrk_threads -c$conns -d${duration}s --latency, $url_path, warm-up ${warmup}s, rounds $rounds"
meta threads "$threads (floodgate server.threads, nginx worker_processes)"
meta nginx "worker_processes $threads; listen ssl$reuseport; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache none; ssl_session_tickets on; ciphers and curves default; keepalive_requests 1000000; upstream keepalive 64"
meta scenarios "${scen_list[*]}"

run_rounds run_wrk
meta_log_sizes

# --- summary -----------------------------------------------------------------------------------
# bench/summary_lib.py: the helpers both benchmarks' summaries share
python3 - "$repo/bench" "$out_dir" "$md_out" <<'PY'
import os, sys

sys.path.insert(0, sys.argv[1])
sys.dont_write_bytecode = True  # no __pycache__ in bench/
import summary_lib as sl
from summary_lib import n, rt, rmed

out, md = sys.argv[2], sys.argv[3]
rows, meta = sl.load(out)
WHAT = {
    "http-ka": "plain HTTP, keep-alive",
    "tls-ka": "TLS, keep-alive",
    "tls-full": "TLS, new connection + full handshake per request",
    "tls-resume": "TLS, new connection + resumed handshake per request",
}
scen, servers = sl.present(rows, meta)
FIELDS = ("req_s", "p50_ms", "p99_ms", "proxy_us_req", "origin_cpu_pct")
summary = sl.summarize(rows, scen, servers, FIELDS,
                       {"ratio_req_s": "req_s", "ratio_p99": "p99_ms", "ratio_us_req": "proxy_us_req"})
sl.write_summary(os.path.join(out, "summary.tsv"), summary,
                 [f"{s}_{x}" for s in servers for x in FIELDS],
                 [("ratio_p99", "ratio_p99"), ("ratio_us_req", "ratio_us_req")])

hdr = ["scenario"]
for s in servers:
    hdr += [f"{s} req/s", f"{s} p99 ms", f"{s} us/req"]
if len(servers) == 2:
    hdr += ["req/s fg/nginx (range)", "p99 fg/nginx", "us/req fg/nginx"]
lines = []
for rec in summary:
    line = [rec["scenario"]]
    for s in servers:
        line += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_p99_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1)]
    if len(servers) == 2:
        line += [rt(rec["ratio_req_s"]), rmed(rec["ratio_p99"]), rmed(rec["ratio_us_req"])]
    lines.append(line)
text = [f"TLS termination, floodgate vs nginx: wrk {meta['wrk']}; medians over rounds",
        "ratios: floodgate / nginx divided within each round, median (min-max over rounds)", ""]
text += sl.aligned(hdr, lines) + [""]
for rec in summary:
    text.append(f"  {rec['scenario']:<10} {WHAT[rec['scenario']]}")
text.append("")
for s in servers:
    a, b = sl.med(rows, s, "tls-ka", "proxy_us_req"), sl.med(rows, s, "http-ka", "proxy_us_req")
    if a is not None and b is not None:
        text.append(f"  TLS on a keep-alive connection costs {s} {a - b:+.1f} us of CPU per request")
PREFIXES = ("tls_", "resumes_", "verify_", "log_")
text += ["  " + l for l in sl.details(meta, (), PREFIXES)]
noisy = sum(int(r["noisy"]) for r in rows)
errs = sum(int(r["socket_errors"]) + int(r["non2xx"]) for r in rows)
if noisy:
    text.append(f"  WARNING: {noisy} run(s) overlapped a build or tests (column noisy in results.tsv)")
if errs:
    text.append(f"  WARNING: {errs} socket errors / non-2xx responses in total (see results.tsv)")
text = "\n".join(text) + "\n"
open(os.path.join(out, "table.txt"), "w").write(text)
print()
print(text, end="")

if md:
    hd = ["scenario", "what"]
    for s in servers:
        hd += [f"{s} req/s", f"{s} p99 ms", f"{s} CPU us/req"]
    if len(servers) == 2:
        hd += ["floodgate / nginx req/s", "per-round range", "p99 ratio", "CPU ratio"]
    cells = []
    for rec in summary:
        c = [rec["scenario"], WHAT[rec["scenario"]]]
        for s in servers:
            c += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_p99_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1)]
        if len(servers) == 2:
            c += [rmed(rec["ratio_req_s"]), sl.rrange(rec["ratio_req_s"]),
                  rmed(rec["ratio_p99"]), rmed(rec["ratio_us_req"])]
        cells.append(c)
    m = sl.markdown(hd, cells) + ["", "```"]
    m += sl.details(meta, ("date", "host", "versions", "floodgate", "wrk", "threads", "nginx"), PREFIXES)
    if noisy:
        m.append(f"noisy runs (a build or tests overlapped): {noisy}")
    if errs:
        m.append(f"socket errors + non-2xx: {errs}")
    m.append("```")
    open(md, "w").write("\n".join(m) + "\n")
    print(f"markdown: {md}")
PY
