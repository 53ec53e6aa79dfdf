#!/usr/bin/env bash
# floodgate's HTTP/2 (TLS, ALPN h2) against nginx's, same certificate, same origin, one run.
#
#   bench/h2.sh [--dir DIR] [--out FILE.md] [--nginx-only]
#     --dir DIR      results directory (default /tmp/floodgate-h2-bench/<timestamp>):
#                    results.tsv (one line per h2load run), summary.tsv, table.txt, meta.txt,
#                    h2load/*.txt (raw h2load output), nginx.conf and the three processes' logs
#     --out FILE     also write a markdown snippet (table + run details) for docs/benchmarks.md
#     --nginx-only   measure nginx alone (same as FG_SKIP=1): no ratios
#
# Environment: DURATION (10 s per h2load run), ROUNDS (3), WARMUP (2 s),
#   THREADS (2: floodgate's server.threads and nginx's worker_processes), H2LOAD_THREADS (2),
#   SCENARIOS ("pass pass-mux limited"), and per scenario the connections and streams per
#   connection: PASS_CONNS (64) PASS_STREAMS (1), MUX_CONNS (8) MUX_STREAMS (32),
#   LIMITED_CONNS (64) LIMITED_STREAMS (8);
#   FG_SKIP=1, FLOODGATE_BIN (build/floodgate), ORIGIN_BIN (build/floodgate-test-origin),
#   NGINX_BIN (nginx), H2LOAD_BIN (h2load), NGINX_REUSEPORT (0; 1 adds `reuseport`,
#   floodgate's SO_REUSEPORT model),
#   BUSY_PATTERN ('cc1plus|ninja|integration_tests|unit_tests|micro_bench': wait while such a
#   process runs, a build or the tests; '' to not check),
#   BUSY_WAIT (900: seconds of waiting for that in the whole run, then measure anyway and mark
#   the rows taken next to it noisy).
#
# Scenarios, each `h2load -t$H2LOAD_THREADS -cC -mM -D$DURATION https://127.0.0.1:PORT/PATH`
# (TLS, ALPN h2: every connection is one TLS handshake, then only HTTP/2 streams), nginx and
# floodgate alternating (who goes first alternates by round), ROUNDS rounds:
#   pass      /, no limits, 64 connections with one stream each: per-request cost of the
#             HTTP/2 framing, HPACK and proxying, without multiplexing
#   pass-mux  /, no limits, 8 connections with 32 concurrent streams each: multiplexing
#             (many streams per connection, each forwarded on its own upstream connection)
#   limited   /limited, 64 connections x 8 streams, a route whose limit holds one request
#             and refills one an hour (floodgate: token bucket on the memory store keyed on
#             the route; nginx: limit_req 1r/m on $server_name): nearly every request is
#             answered 429 by the proxy itself, the origin is not contacted
# Each run is checked: ALPN must have chosen h2, nothing may have errored, the pass scenarios
# must be all 2xx and limited at least 99 % 4xx; a run that is not is marked failed (column
# check in results.tsv) and left out of the medians, and the script exits 1 at the end.
# Columns: req/s is h2load's "finished in ..., N req/s" (every response, 429s included);
# mean ms is h2load's mean "time for request" (stream opened to stream closed; h2load has no
# percentiles); us/req is the proxy's own user+system CPU time per response (nginx: master +
# workers); 4xx % the share of 4xx among all responses (all rounds). Ratios are
# floodgate / nginx, divided within each round, then the median over rounds.
#
# nginx: worker_processes $THREADS; listen ssl http2 (1.22 syntax), the certificate,
# TLSv1.2 TLSv1.3; http2_max_concurrent_streams 128 (floodgate's default);
# keepalive_requests 1000000 (since nginx 1.19.7 it also bounds the requests of an HTTP/2
# connection; the obsolete http2_max_requests is added only if this nginx still takes it
# without complaint); upstream keepalive 64, proxy_http_version 1.1, Connection "";
# access_log off. floodgate: bench/configs/h2.yaml.
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
warmup=${WARMUP:-2}
threads=${THREADS:-2}
h2load_threads=${H2LOAD_THREADS:-2}
scenarios=${SCENARIOS:-"pass pass-mux limited"}
fg_bin=${FLOODGATE_BIN:-build/floodgate}
origin_bin=${ORIGIN_BIN:-build/floodgate-test-origin}
nginx_bin=${NGINX_BIN:-nginx}
h2load_bin=${H2LOAD_BIN:-h2load}
busy_pattern=${BUSY_PATTERN-cc1plus|ninja|integration_tests|unit_tests|micro_bench}
busy_wait=${BUSY_WAIT:-900}
out_dir=${out_dir:-/tmp/floodgate-h2-bench/$(date +%Y%m%d-%H%M%S)}

# scenario -> "connections streams path"
declare -A scen_conns scen_streams scen_path
scen_conns[pass]=${PASS_CONNS:-64}      scen_streams[pass]=${PASS_STREAMS:-1}       scen_path[pass]=/
scen_conns[pass-mux]=${MUX_CONNS:-8}    scen_streams[pass-mux]=${MUX_STREAMS:-32}   scen_path[pass-mux]=/
scen_conns[limited]=${LIMITED_CONNS:-64} scen_streams[limited]=${LIMITED_STREAMS:-8} scen_path[limited]=/limited
read -ra scen_list <<<"$scenarios"
for s in "${scen_list[@]}"; do
  [[ -n ${scen_path[$s]:-} ]] || die "unknown scenario $s (pass, pass-mux, limited)"
  # h2load gives each of its threads at least one connection
  ((scen_conns[$s] >= h2load_threads)) || die "$s: fewer connections than H2LOAD_THREADS"
done
need_tools "$h2load_bin" openssl curl python3 timeout "$nginx_bin"
# curl is the independent check that both servers speak HTTP/2 before anything is measured
curl -V | grep -qw HTTP2 || die "this curl has no HTTP/2 (not built with nghttp2)"
check_binaries

bench_init h2load floodgate-h2
wait_idle || true

make_cert     # the same for both servers
start_origin  # the shared backend

# --- floodgate ----------------------------------------------------------------------------
declare -A tls_port proc_pid
servers=()
if [[ $fg_skip == 0 ]]; then
  floodgate_env
  # a config error is reported as such (FILE:LINE:COL), not as "did not become ready"
  "$fg_bin" --check-config bench/configs/h2.yaml >"$tmp/check.txt" 2>&1 ||
    { sed 's/^/    /' "$tmp/check.txt" >&2; die "floodgate rejects bench/configs/h2.yaml"; }
  start_floodgate bench/configs/h2.yaml || floodgate_not_ready
  tls_port[floodgate]=$FG_TLS_PORT proc_pid[floodgate]=$fg_pid
  servers+=(floodgate)
fi

# --- nginx ----------------------------------------------------------------------------------
nginx_dir
ng_tls=$(free_port)
# write_nginx_conf EXTRA: EXTRA is http-level directives that this nginx may not take
write_nginx_conf() {
  {
    nginx_conf_start "bench/h2.sh: nginx serving HTTP/2 over TLS in front of the test origin"
    nginx_conf_h2 "$1"
    cat <<CONF
  upstream origin {
    server 127.0.0.1:$origin_port;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$ng_tls ssl http2 backlog=4096$reuseport;
    # limit_req does not count requests whose key is empty: \$server_name must be set
    server_name localhost;
    ssl_certificate     $cert;
    ssl_certificate_key $key;
    ssl_protocols TLSv1.2 TLSv1.3;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      proxy_pass http://origin;
    }
    location /limited {
      limit_req zone=one nodelay;
      proxy_pass http://origin;
    }
  }
}
CONF
  } >"$ng/nginx.conf"
}
nginx_test() { "$nginx_bin" -t -p "$ng" -e "$tmp/nginx-t-error.log" -c "$ng/nginx.conf" >"$tmp/nginx-t.txt" 2>&1; }
# http2_max_requests is obsolete since 1.19.7 (keepalive_requests took over): keep it only if
# this nginx neither rejects it nor warns about it
extra='http2_max_requests 1000000;'
write_nginx_conf "$extra"
if ! nginx_test || grep -q http2_max_requests "$tmp/nginx-t.txt"; then
  note "nginx: dropping 'http2_max_requests' ($(grep -m1 http2_max_requests "$tmp/nginx-t.txt" | sed 's/^nginx: //' || echo 'rejected'))"
  extra=''
  write_nginx_conf "$extra"
  nginx_test || { sed 's/^/    /' "$tmp/nginx-t.txt" >&2; die "nginx -t rejects the generated config"; }
fi
start_nginx --cacert "$cert" "https://127.0.0.1:$ng_tls/"
tls_port[nginx]=$ng_tls proc_pid[nginx]=$ng_pid
servers=(nginx "${servers[@]}")

# --- checks: HTTP/2 is negotiated, / is 200 and /limited turns 429 -------------------------
# h2_get SERVER PATH: "HTTP_VERSION STATUS" (--cacert: the server must present our certificate)
h2_get() {
  curl --http2 --cacert "$cert" --max-time 5 -sS -o /dev/null -w '%{http_version} %{http_code}' \
    "https://127.0.0.1:${tls_port[$1]}$2"
}
for s in "${servers[@]}"; do
  got=$(h2_get "$s" /) || die "$s: https://127.0.0.1:${tls_port[$s]}/ failed"
  [[ $got == "2 200" ]] || die "$s: / answered '$got' (HTTP version, status), not '2 200'"
  # the bucket (floodgate) and the minute's request (nginx) let the first one through
  limited=()
  for _ in 1 2 3; do
    got=$(h2_get "$s" /limited) || die "$s: https://127.0.0.1:${tls_port[$s]}/limited failed"
    limited+=("$got")
    [[ $got == "2 429" ]] && break
  done
  [[ $got == "2 429" ]] || die "$s: /limited never answered 429 over HTTP/2 (got: ${limited[*]})"
  meta "check_$s" "/ -> 2 200; /limited -> $(IFS=,; echo "${limited[*]}")"
  note "$s: HTTP/2 / 200, /limited ${limited[*]}"
done

# --- measurement -----------------------------------------------------------------------------
# run_h2load SERVER SCENARIO SECONDS OUTFILE
run_h2load() {
  local s=$1 sc=$2 secs=$3 file=$4
  run_load timeout -k 5 $((secs + 30)) "$h2load_bin" -t"$h2load_threads" -c"${scen_conns[$sc]}" \
    -m"${scen_streams[$sc]}" -D"$secs" "https://127.0.0.1:${tls_port[$s]}${scen_path[$sc]}" \
    >"$file" 2>&1 || note "h2load exited with $? ($s $sc, see $file)"
}

results=$out_dir/results.tsv
printf 'round\tserver\tscenario\treq_s\trequests\ts2xx\ts3xx\ts4xx\ts5xx\terrored\tmean_ms\tmax_ms\tproxy_us_req\torigin_cpu_pct\tprotocol\tcheck\tnoisy\n' >"$results"
declare -A tls_seen
measure() {  # ROUND SERVER SCENARIO
  local r=$1 s=$2 sc=$3 file
  file=$out_dir/h2load/r$r-$s-$sc.txt
  timed_run "${proc_pid[$s]}" run_h2load "$s" "$sc" "$duration" "$file"
  local noisy=$run_noisy rps reqs errored tmo s2 s3 s4 s5 mean mx proto tlsinfo
  IFS=$'\t' read -r rps reqs errored tmo s2 s3 s4 s5 mean mx proto tlsinfo < <(parse_h2load "$file")
  # what makes a run not count: see the usage comment
  local why=()
  [[ -n $rps ]] || { why+=(no-result); rps=0; }
  [[ $proto == h2 ]] || why+=("alpn-${proto:-none}")
  ((errored + tmo == 0)) || why+=(errors)
  local all=$((s2 + s3 + s4 + s5))
  ((all > 0)) || why+=(no-responses)
  if [[ $sc == limited ]]; then
    ((s5 == 0 && s4 * 100 >= all * 99)) || why+=(under-99pct-4xx)
  else
    ((s3 + s4 + s5 == 0)) || why+=(non-2xx)
  fi
  local check=ok
  ((${#why[@]} == 0)) || check=$(IFS=,; echo "failed:${why[*]}")
  [[ -n ${tls_seen[$s]:-} || -z $tlsinfo ]] || { tls_seen[$s]=$tlsinfo; meta "tls_$s" "$tlsinfo"; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$sc" \
    "$rps" "$reqs" "$s2" "$s3" "$s4" "$s5" "$((errored + tmo))" "${mean:-0}" "${mx:-0}" \
    "$(proxy_us_per_req "$reqs")" "$(origin_cpu_pct)" "${proto:-none}" "$check" "$noisy" >>"$results"
  local flag=
  ((noisy)) && flag='  (noisy: a build or tests ran)'
  [[ $check == ok ]] || flag+="  FAILED (${check#failed:})"
  printf '  round %s  %-9s %-8s %10s req/s  mean %7s ms  2xx %s 4xx %s 5xx %s err %s%s\n' "$r" "$s" \
    "$sc" "$rps" "${mean:-?}" "$s2" "$s4" "$s5" "$((errored + tmo))" "$flag"
}

meta_host
meta versions "$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), $("$h2load_bin" --version 2>&1 | head -n1), $(openssl version | awk '{print $1 " " $2}')"
meta_floodgate
meta h2load "-t$h2load_threads -D$duration, warm-up ${warmup}s, rounds $rounds; $(for sc in "${scen_list[@]}"; do printf '%s -c%s -m%s %s; ' "$sc" "${scen_conns[$sc]}" "${scen_streams[$sc]}" "${scen_path[$sc]}"; done | sed 's/; $//')"
meta threads "$threads (floodgate server.threads, nginx worker_processes)"
meta nginx "worker_processes $threads; listen ssl http2$reuseport; TLSv1.2 TLSv1.3; http2_max_concurrent_streams 128; keepalive_requests 1000000${extra:+; $extra}; upstream keepalive 64; limit_req 1r/m on /limited"
meta scenarios "${scen_list[*]}"

run_rounds run_h2load
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
    "pass": "no limits, many connections, 1 stream each",
    "pass-mux": "no limits, few connections, many streams each",
    "limited": "tiny limit: nearly every request answered 429",
}
scen, servers = sl.present(rows, meta)
good = [r for r in rows if r["check"] == "ok"]  # failed runs stay out of medians and ratios

def codes(s, sc):  # status counts over all rounds, failed runs included (they are the story)
    t = {k: 0 for k in ("s2xx", "s3xx", "s4xx", "s5xx", "errored")}
    for r in rows:
        if r["server"] == s and r["scenario"] == sc:
            for k in t:
                t[k] += int(r[k])
    return t

def share4(s, sc):
    t = codes(s, sc)
    a = t["s2xx"] + t["s3xx"] + t["s4xx"] + t["s5xx"]
    return 100 * t["s4xx"] / a if a else None

FIELDS = ("req_s", "mean_ms", "max_ms", "proxy_us_req", "origin_cpu_pct")
summary = sl.summarize(good, scen, servers, FIELDS,
                       {"ratio_req_s": "req_s", "ratio_mean": "mean_ms", "ratio_us_req": "proxy_us_req"})
for rec in summary:
    for s in servers:
        rec[f"{s}_4xx_pct"] = share4(s, rec["scenario"])
sl.write_summary(os.path.join(out, "summary.tsv"), summary,
                 [f"{s}_{x}" for s in servers for x in FIELDS + ("4xx_pct",)],
                 [("ratio_mean_ms", "ratio_mean"), ("ratio_us_req", "ratio_us_req")])

hdr = ["scenario"]
for s in servers:
    hdr += [f"{s} req/s", f"{s} mean ms", f"{s} us/req", f"{s} 4xx %"]
if len(servers) == 2:
    hdr += ["req/s fg/nginx (range)", "mean ms fg/nginx", "us/req fg/nginx"]
lines = []
for rec in summary:
    line = [rec["scenario"]]
    for s in servers:
        line += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_mean_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1),
                 n(rec[f"{s}_4xx_pct"], 1)]
    if len(servers) == 2:
        line += [rt(rec["ratio_req_s"]), rmed(rec["ratio_mean"]), rmed(rec["ratio_us_req"])]
    lines.append(line)
text = [f"HTTP/2 over TLS, floodgate vs nginx: h2load {meta['h2load']}; medians over rounds",
        "ratios: floodgate / nginx divided within each round, median (min-max over rounds)", ""]
text += sl.aligned(hdr, lines) + [""]
for rec in summary:
    text.append(f"  {rec['scenario']:<9} {WHAT[rec['scenario']]}")
text.append("")
text.append("  status codes over all rounds (2xx 3xx 4xx 5xx, errored):")
for sc in scen:
    for s in servers:
        t = codes(s, sc)
        text.append(f"    {sc:<9} {s:<9} {t['s2xx']} {t['s3xx']} {t['s4xx']} {t['s5xx']}, {t['errored']}")
text += ["  " + l for l in sl.details(meta, (), ("check_", "tls_", "log_"))]
noisy = sum(int(r["noisy"]) for r in rows)
failed = [r for r in rows if r["check"] != "ok"]
if len(servers) == 2 and meta.get("tls_nginx") != meta.get("tls_floodgate"):
    text.append("  WARNING: h2load negotiated different TLS parameters with nginx and floodgate")
if noisy:
    text.append(f"  WARNING: {noisy} run(s) overlapped a build or tests (column noisy in results.tsv)")
for r in failed:
    text.append(f"  FAILED: round {r['round']} {r['server']} {r['scenario']}: {r['check']} (left out of the medians)")
text = "\n".join(text) + "\n"
open(os.path.join(out, "table.txt"), "w").write(text)
print()
print(text, end="")

if md:
    hd = ["scenario", "what"]
    for s in servers:
        hd += [f"{s} req/s", f"{s} mean ms", f"{s} CPU us/req", f"{s} 4xx %"]
    if len(servers) == 2:
        hd += ["floodgate / nginx req/s", "per-round range", "mean latency ratio", "CPU ratio"]
    cells = []
    for rec in summary:
        c = [rec["scenario"], WHAT[rec["scenario"]]]
        for s in servers:
            c += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_mean_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1),
                  n(rec[f"{s}_4xx_pct"], 1)]
        if len(servers) == 2:
            c += [rmed(rec["ratio_req_s"]), sl.rrange(rec["ratio_req_s"]),
                  rmed(rec["ratio_mean"]), rmed(rec["ratio_us_req"])]
        cells.append(c)
    m = sl.markdown(hd, cells) + ["", "```"]
    m += sl.details(meta, ("date", "host", "versions", "floodgate", "h2load", "threads", "nginx"),
                    ("tls_", "log_"))
    if noisy:
        m.append(f"noisy runs (a build or tests overlapped): {noisy}")
    if failed:
        m.append(f"failed runs (left out): {len(failed)}")
    m.append("```")
    open(md, "w").write("\n".join(m) + "\n")
    print(f"markdown: {md}")
sys.exit(1 if failed else 0)
PY
