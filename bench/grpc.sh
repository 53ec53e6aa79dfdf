#!/usr/bin/env bash
# gRPC unary calls through floodgate (an h2 upstream) against nginx's grpc_pass, same origin,
# one run (issue 17's benchmark).
#
#   bench/grpc.sh [--dir DIR] [--out FILE.md] [--nginx-only]
#     --dir DIR      results directory (default /tmp/floodgate-grpc-bench/<timestamp>):
#                    results.tsv, summary.tsv, table.txt, meta.txt, h2load/*.txt,
#                    nginx.conf and the processes' logs
#     --out FILE     also write a markdown snippet (table + run details) for docs/benchmarks.md
#     --nginx-only   measure nginx alone (same as FG_SKIP=1): no ratios
#
# Environment: DURATION (10 s per h2load run), ROUNDS (3), WARMUP (2 s), THREADS (2:
#   floodgate's server.threads and nginx's worker_processes), H2LOAD_THREADS (2),
#   ORIGIN_WORKERS (2: nghttpd's), SCENARIOS ("unary unary-mux limited"), UNARY_CONNS (64)
#   UNARY_STREAMS (1), MUX_CONNS (8) MUX_STREAMS (32), LIMITED_CONNS (64) LIMITED_STREAMS (8);
#   FG_SKIP=1, FLOODGATE_BIN (build/floodgate), NGINX_BIN (nginx), NGHTTPD_BIN (nghttpd),
#   H2LOAD_BIN (h2load), BUSY_PATTERN and BUSY_WAIT as bench/h2.sh.
#
# The origin is nghttpd (nghttp2-server) answering every POST to /floodgate.test.Echo/Unary
# with one gRPC message (tests/integration/grpc/echo.proto's Msg{text: "hello", n: 3}) and
# the trailer grpc-status: 0: a gRPC server that costs next to nothing, so that the proxies
# are what is measured. Each call is `h2load -d MSG -H 'content-type: application/grpc'
# -H 'te: trailers'` on h2c with prior knowledge, as a gRPC client sends it:
#   unary      64 connections, one call at a time on each
#   unary-mux  8 connections with 32 concurrent calls each (a gRPC channel's way)
#   limited    64 x 8 calls to /limited, nearly all refused by the proxy: floodgate answers
#              trailers-only grpc-status 8 (HTTP 200, as gRPC wants), nginx's limit_req 429
# floodgate decides a limit on every call to the unary paths (token bucket on the embedded
# store, keyed by IP, never reached); nginx only proxies. Checks: h2c negotiated, nothing
# errored, unary runs all 2xx; a failed run is left out of the medians and the script exits 1.
# Ratios are floodgate / nginx within each round, then the median over rounds.
#
# nginx: worker_processes $THREADS; listen http2 (h2c); http2_max_concurrent_streams 128;
# keepalive_requests 1000000; upstream keepalive 64; grpc_pass; access_log off.
# floodgate: bench/configs/grpc.yaml. Stand-alone: nothing here uses ../shared.
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
scenarios=${SCENARIOS:-"unary unary-mux limited"}
fg_bin=${FLOODGATE_BIN:-build/floodgate}
nginx_bin=${NGINX_BIN:-nginx}
nghttpd_bin=${NGHTTPD_BIN:-nghttpd}
h2load_bin=${H2LOAD_BIN:-h2load}
busy_pattern=${BUSY_PATTERN-cc1plus|ninja|integration_tests|unit_tests|micro_bench}
busy_wait=${BUSY_WAIT:-900}
out_dir=${out_dir:-/tmp/floodgate-grpc-bench/$(date +%Y%m%d-%H%M%S)}
call_path=/floodgate.test.Echo/Unary

declare -A scen_conns scen_streams scen_path
scen_conns[unary]=${UNARY_CONNS:-64}     scen_streams[unary]=${UNARY_STREAMS:-1}     scen_path[unary]=$call_path
scen_conns[unary-mux]=${MUX_CONNS:-8}    scen_streams[unary-mux]=${MUX_STREAMS:-32}  scen_path[unary-mux]=$call_path
scen_conns[limited]=${LIMITED_CONNS:-64} scen_streams[limited]=${LIMITED_STREAMS:-8} scen_path[limited]=/limited$call_path
read -ra scen_list <<<"$scenarios"
for s in "${scen_list[@]}"; do
  [[ -n ${scen_path[$s]:-} ]] || die "unknown scenario $s (unary, unary-mux, limited)"
  ((scen_conns[$s] >= h2load_threads)) || die "$s: fewer connections than H2LOAD_THREADS"
done
need_tools "$h2load_bin" "$nghttpd_bin" python3 timeout "$nginx_bin"
[[ $fg_skip == 1 || -x $fg_bin ]] || die "no floodgate at $fg_bin (build it, or --nginx-only)"

bench_init h2load floodgate-grpc
wait_idle || true

# --- the origin: nghttpd with one gRPC answer, and the call's request message --------------
# A gRPC message is a 5-byte prefix (not compressed, 4-byte big-endian length) and the
# protobuf bytes: Msg{text: "hello" (field 1), n: 3 (field 2)}.
msg=$tmp/msg.bin
printf '\x00\x00\x00\x00\x09\x0a\x05hello\x10\x03' >"$msg"
mkdir -p "$tmp/root/floodgate.test.Echo" "$tmp/root/limited/floodgate.test.Echo"
cp "$msg" "$tmp/root/floodgate.test.Echo/Unary"
cp "$msg" "$tmp/root/limited/floodgate.test.Echo/Unary"
origin_port=$(free_port)
"$nghttpd_bin" --no-tls -n "${ORIGIN_WORKERS:-2}" --trailer 'grpc-status: 0' -d "$tmp/root" \
  "$origin_port" >"$out_dir/origin.log" 2>&1 & origin_pid=$!; pids+=("$origin_pid")

# call PORT PATH [N]: h2load's calls, N of them (default 1), one line of its summary
call() {
  "$h2load_bin" -n "${3:-1}" -c 1 -d "$msg" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$1$2" 2>&1
}
for _ in $(seq 50); do call "$origin_port" "$call_path" | grep -q '1 succeeded' && break; sleep 0.1; done
call "$origin_port" "$call_path" | grep -q 'status codes: 1 2xx' || die "nghttpd does not answer on $origin_port"

# --- the proxies ------------------------------------------------------------------------------
declare -A port proc_pid
servers=()
if [[ $fg_skip == 0 ]]; then
  export FG_PORT FG_ADMIN_PORT FG_ORIGIN_PORT=$origin_port FG_THREADS=$threads
  FG_PORT=$(free_port) FG_ADMIN_PORT=$(free_port)
  "$fg_bin" --check-config bench/configs/grpc.yaml >"$tmp/check.txt" 2>&1 ||
    { sed 's/^/    /' "$tmp/check.txt" >&2; die "floodgate rejects bench/configs/grpc.yaml"; }
  start_floodgate bench/configs/grpc.yaml || floodgate_not_ready
  port[floodgate]=$FG_PORT proc_pid[floodgate]=$fg_pid
  servers+=(floodgate)
fi
nginx_dir
ng_port=$(free_port)
{
  nginx_conf_start "bench/grpc.sh: nginx's grpc_pass in front of the same origin"
  nginx_conf_h2 ""
  cat <<CONF
  upstream grpc_origin {
    server 127.0.0.1:$origin_port;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$ng_port http2 backlog=4096$reuseport;
    server_name localhost;
    location / { grpc_pass grpc://grpc_origin; }
    location /limited { limit_req zone=one nodelay; grpc_pass grpc://grpc_origin; }
  }
}
CONF
} >"$ng/nginx.conf"
cp "$ng/nginx.conf" "$out_dir/nginx.conf"
"$nginx_bin" -p "$ng" -e "$out_dir/nginx-error.log" -c "$ng/nginx.conf" & ng_pid=$!; pids+=("$ng_pid")
for _ in $(seq 50); do call "$ng_port" "$call_path" | grep -q '1 succeeded' && break; sleep 0.1; done
port[nginx]=$ng_port proc_pid[nginx]=$ng_pid
servers=(nginx "${servers[@]}")

# A call through each proxy reaches the origin and comes back 200 over h2c.
for s in "${servers[@]}"; do
  out=$(call "${port[$s]}" "$call_path")
  grep -q 'status codes: 1 2xx' <<<"$out" || { echo "$out" >&2; die "$s: the call through it failed"; }
  grep -q 'Application protocol: h2c' <<<"$out" || die "$s: not h2c"
  meta "check_$s" "$call_path -> 200 over h2c"
done

# --- measurement -------------------------------------------------------------------------------
run_h2load() {  # SERVER SCENARIO SECONDS OUTFILE
  local s=$1 sc=$2 secs=$3 file=$4
  run_load timeout -k 5 $((secs + 30)) "$h2load_bin" -t"$h2load_threads" -c"${scen_conns[$sc]}" \
    -m"${scen_streams[$sc]}" -D"$secs" -d "$msg" -H 'content-type: application/grpc' \
    -H 'te: trailers' "http://127.0.0.1:${port[$s]}${scen_path[$sc]}" >"$file" 2>&1 ||
    note "h2load exited with $? ($s $sc, see $file)"
}
results=$out_dir/results.tsv
printf 'round\tserver\tscenario\treq_s\trequests\ts2xx\ts4xx\ts5xx\terrored\tmean_ms\tproxy_us_req\torigin_cpu_pct\tcheck\tnoisy\n' >"$results"
measure() {  # ROUND SERVER SCENARIO
  local r=$1 s=$2 sc=$3 file rps reqs errored tmo s2 s3 s4 s5 mean mx proto tlsinfo
  file=$out_dir/h2load/r$r-$s-$sc.txt
  timed_run "${proc_pid[$s]}" run_h2load "$s" "$sc" "$duration" "$file"
  IFS=$'\t' read -r rps reqs errored tmo s2 s3 s4 s5 mean mx proto tlsinfo < <(parse_h2load "$file")
  local why=()
  [[ -n $rps ]] || { why+=(no-result); rps=0; }
  [[ $proto == h2c ]] || why+=("protocol-${proto:-none}")
  ((errored + tmo == 0)) || why+=(errors)
  [[ $sc == limited ]] || ((s3 + s4 + s5 == 0)) || why+=(non-2xx)
  local check=ok
  ((${#why[@]} == 0)) || check=$(IFS=,; echo "failed:${why[*]}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$sc" "$rps" "$reqs" \
    "$s2" "$s4" "$s5" "$((errored + tmo))" "${mean:-0}" "$(proxy_us_per_req "$reqs")" \
    "$(origin_cpu_pct)" "$check" "$run_noisy" >>"$results"
  printf '  round %s  %-9s %-9s %10s calls/s  mean %7s ms  2xx %s 4xx %s  %s\n' "$r" "$s" "$sc" \
    "$rps" "${mean:-?}" "$s2" "$s4" "$check"
}

meta_host
meta versions "$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //'), $("$h2load_bin" --version 2>&1 | head -n1), $("$nghttpd_bin" --version 2>&1 | head -n1)"
meta_floodgate
meta h2load "-t$h2load_threads -D$duration, warm-up ${warmup}s, rounds $rounds; $(for sc in "${scen_list[@]}"; do printf '%s -c%s -m%s; ' "$sc" "${scen_conns[$sc]}" "${scen_streams[$sc]}"; done | sed 's/; $//')"
meta threads "$threads (floodgate server.threads, nginx worker_processes); nghttpd -n ${ORIGIN_WORKERS:-2}"
meta scenarios "${scen_list[*]}"
run_rounds run_h2load
meta_log_sizes

# --- summary (bench/summary_lib.py) ----------------------------------------------------------
python3 - "$repo/bench" "$out_dir" "$md_out" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
sys.dont_write_bytecode = True
import summary_lib as sl
from summary_lib import n, rt, rmed

out, md = sys.argv[2], sys.argv[3]
rows, meta = sl.load(out)
WHAT = {"unary": "64 connections, one call at a time each",
        "unary-mux": "8 connections, 32 concurrent calls each",
        "limited": "nearly every call refused by the proxy"}
scen, servers = sl.present(rows, meta)
good = [r for r in rows if r["check"] == "ok"]
FIELDS = ("req_s", "mean_ms", "proxy_us_req", "origin_cpu_pct")
summary = sl.summarize(good, scen, servers, FIELDS,
                       {"ratio_req_s": "req_s", "ratio_mean": "mean_ms", "ratio_us_req": "proxy_us_req"})
sl.write_summary(os.path.join(out, "summary.tsv"), summary,
                 [f"{s}_{x}" for s in servers for x in FIELDS],
                 [("ratio_mean_ms", "ratio_mean"), ("ratio_us_req", "ratio_us_req")])
hdr, lines = ["scenario"], []
for s in servers:
    hdr += [f"{s} calls/s", f"{s} mean ms", f"{s} us/call"]
if len(servers) == 2:
    hdr += ["calls/s fg/nginx (range)", "mean ms fg/nginx", "us/call fg/nginx"]
for rec in summary:
    line = [rec["scenario"]]
    for s in servers:
        line += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_mean_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1)]
    if len(servers) == 2:
        line += [rt(rec["ratio_req_s"]), rmed(rec["ratio_mean"]), rmed(rec["ratio_us_req"])]
    lines.append(line)
failed = [r for r in rows if r["check"] != "ok"]
noisy = sum(int(r["noisy"]) for r in rows)
text = [f"gRPC unary calls, floodgate (h2 upstream) vs nginx grpc_pass: h2load {meta['h2load']}",
        "ratios: floodgate / nginx divided within each round, median (min-max over rounds)", ""]
text += sl.aligned(hdr, lines) + [""]
text += [f"  {rec['scenario']:<9} {WHAT[rec['scenario']]}" for rec in summary]
text += ["  " + l for l in sl.details(meta, (), ("check_", "log_"))]
if noisy:
    text.append(f"  WARNING: {noisy} run(s) overlapped a build or tests (column noisy in results.tsv)")
text += [f"  FAILED: round {r['round']} {r['server']} {r['scenario']}: {r['check']}" for r in failed]
text = "\n".join(text) + "\n"
open(os.path.join(out, "table.txt"), "w").write(text)
print()
print(text, end="")
if md:
    hd = ["scenario", "what"] + [f"{s} {c}" for s in servers for c in ("calls/s", "mean ms", "CPU us/call")]
    if len(servers) == 2:
        hd += ["floodgate / nginx calls/s", "per-round range", "mean latency ratio", "CPU ratio"]
    cells = []
    for rec in summary:
        c = [rec["scenario"], WHAT[rec["scenario"]]]
        for s in servers:
            c += [n(rec[f"{s}_req_s"]), n(rec[f"{s}_mean_ms"], 2), n(rec[f"{s}_proxy_us_req"], 1)]
        if len(servers) == 2:
            c += [rmed(rec["ratio_req_s"]), sl.rrange(rec["ratio_req_s"]), rmed(rec["ratio_mean"]),
                  rmed(rec["ratio_us_req"])]
        cells.append(c)
    m = sl.markdown(hd, cells) + ["", "```"]
    m += sl.details(meta, ("date", "host", "versions", "floodgate", "h2load", "threads"), ("log_",))
    if noisy:
        m.append(f"noisy runs (a build or tests overlapped): {noisy}")
    if failed:
        m.append(f"failed runs (left out): {len(failed)}")
    m.append("```")
    open(md, "w").write("\n".join(m) + "\n")
    print(f"markdown: {md}")
sys.exit(1 if failed else 0)
PY
