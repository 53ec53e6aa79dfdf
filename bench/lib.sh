# shellcheck shell=bash
# Shared pieces of the proxy-against-nginx benchmarks (bench/tls.sh, h2.sh, grpc.sh): process
# bookkeeping, the busy-machine guard, CPU accounting, the certificate, starting the origin,
# floodgate and nginx, and meta.txt. Sourced from the repository root after `cd`; it only
# defines functions (bench/profile.sh sources it for free_port alone).
#
# The functions read these globals of the calling script: out_dir (results), tmp (scratch,
# removed on exit), busy_pattern and busy_wait, fg_bin, origin_bin, nginx_bin, threads,
# fg_skip, repo, and for run_rounds servers, scen_list, warmup, rounds and a measure function.
# They set: pids (everything started, stopped on exit), load_pid, sampler_pid, busy_left,
# hz, meta_file, cert and key, origin_pid and origin_port, fg_pid, ng and reuseport, ng_pid,
# and timed_run's run_*.
# the globals above are assigned (SC2154) or used (SC2034) by the sourcing script:
# shellcheck disable=SC2154,SC2034

# die / note: messages prefixed with the script's name (die exits 2: a setup problem).
die() { echo "${0##*/}: $*" >&2; exit 2; }
note() { echo "${0##*/}: $*" >&2; }

# bench_args "$@": the options both scripts take (--dir DIR, --out FILE, --nginx-only, --help:
# the script's header comment). Sets out_dir, md_out and fg_skip (FG_SKIP=1 too); --dir and
# --out are relative to where the script was called from ($caller).
bench_args() {
  out_dir='' md_out=''
  fg_skip=${FG_SKIP:-0}
  while (($#)); do
    case $1 in
      --dir) out_dir=${2:?--dir needs a directory}; shift 2 ;;
      --out) md_out=${2:?--out needs a file}; shift 2 ;;
      --nginx-only) fg_skip=1; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "${0##*/}: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
  done
  [[ $fg_skip == 0 || $fg_skip == 1 ]] || fg_skip=1
  [[ -z $out_dir || $out_dir == /* ]] || out_dir=$caller/$out_dir
  [[ -z $md_out || $md_out == /* ]] || md_out=$caller/$md_out
}

# dir_args "$@": the options of the scripts that take only --dir DIR (and --help): sets
# out_dir ('' when not given; relative to where the script was called from, $caller).
dir_args() {
  out_dir=''
  while (($#)); do
    case $1 in
      --dir) out_dir=${2:?--dir needs a directory}; shift 2 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) die "unknown argument $1 (see --help)" ;;
    esac
  done
  [[ -z $out_dir || $out_dir == /* ]] || out_dir=$caller/$out_dir
}

# need_tools TOOL...: dies naming the first one that is not on PATH.
need_tools() {
  local tool
  for tool in "$@"; do command -v "$tool" >/dev/null || die "needs $tool"; done
}

# check_binaries: the origin is always needed, floodgate unless only nginx is measured.
check_binaries() {
  [[ -x $origin_bin ]] || die "no origin at $origin_bin: cmake --build build --target floodgate-test-origin"
  if [[ $fg_skip == 0 && ! -x $fg_bin ]]; then
    die "no floodgate at $fg_bin (build it, or FG_SKIP=1 / --nginx-only to measure nginx alone)"
  fi
}

# bench_init RAW_SUBDIR TMP_NAME: creates $out_dir/RAW_SUBDIR (the load generator's raw
# output) and makes out_dir absolute, a scratch directory tmp (/tmp/TMP_NAME.XXXXXX), an
# empty meta.txt, and arranges for everything started later to be stopped on exit.
bench_init() {
  mkdir -p "$out_dir/$1"
  out_dir=$(cd "$out_dir" && pwd)
  tmp=$(mktemp -d "/tmp/$2.XXXXXX")
  pids=()
  load_pid='' sampler_pid=''
  busy_left=$busy_wait
  hz=$(getconf CLK_TCK)
  meta_file=$out_dir/meta.txt
  : >"$meta_file"
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

# bench_cleanup (the EXIT trap): stops the load generator and the sampler, then every
# process in pids, politely first (5 s for all of them), and removes the scratch directory.
bench_cleanup() {
  local p
  if [[ -n $load_pid ]]; then kill -TERM "$load_pid" 2>/dev/null || true; fi
  if [[ -n $sampler_pid ]]; then kill -TERM "$sampler_pid" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits while a build or the tests run (numbers taken next to them are noise). 0 = idle.
# BUSY_WAIT is one budget for the whole run: once spent, nothing waits any more.
wait_idle() {
  [[ -n $busy_pattern ]] || return 0
  pgrep -f "$busy_pattern" >/dev/null || return 0
  ((busy_left > 0)) || return 1
  note "a build or test run is going on (pgrep -f '$busy_pattern'); waiting (at most ${busy_left}s more)"
  while pgrep -f "$busy_pattern" >/dev/null; do
    if ((busy_left <= 0)); then
      note "still busy; measuring anyway (such rows are marked noisy)"
      return 1
    fi
    sleep 5; busy_left=$((busy_left - 5))
  done
  return 0
}
# Notes, once a second, whether one runs while the load generator does: start_sampler /
# stop_sampler.
start_sampler() {
  rm -f "$tmp/busy"
  [[ -n $busy_pattern ]] || return 0
  (while :; do pgrep -f "$busy_pattern" >/dev/null && : >"$tmp/busy"; sleep 1; done) &
  sampler_pid=$!
}
stop_sampler() {  # 0 = one was seen
  if [[ -n $sampler_pid ]]; then kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; fi
  sampler_pid=
  [[ -e $tmp/busy ]]
}

# make_cert: cert and key, EC P-256, self-signed, for localhost and 127.0.0.1 (both servers
# get the same one, so that the handshakes cost the same).
make_cert() {
  cert=$tmp/cert.pem key=$tmp/key.pem
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$key" -out "$cert" 2>"$tmp/openssl.log" || { cat "$tmp/openssl.log" >&2; die "openssl req failed"; }
}

# start_origin: the test origin, the backend both proxies share, on a port it picks itself
# and prints; sets origin_pid and origin_port.
start_origin() {
  "$origin_bin" --port 0 >"$tmp/origin.port" 2>"$out_dir/origin.log" & origin_pid=$!; pids+=("$origin_pid")
  for _ in $(seq 50); do [[ -s $tmp/origin.port ]] && break; sleep 0.1; done
  origin_port=$(head -n1 "$tmp/origin.port")
  [[ $origin_port =~ ^[0-9]+$ ]] || die "the origin did not print its port (see $out_dir/origin.log)"
}

# wait_http PID TRIES CURL_ARGS...: polls the URL in CURL_ARGS every 0.1 s, at most TRIES
# times, until it answers 2xx (0) or PID has exited or time is up (1).
wait_http() {
  local pid=$1 tries=$2
  shift 2
  for _ in $(seq "$tries"); do
    kill -0 "$pid" 2>/dev/null || return 1
    curl -fso /dev/null "$@" && return 0
    sleep 0.1
  done
  return 1
}

# floodgate_env: exports what both bench/configs/*.yaml read: FG_TLS_PORT and FG_ADMIN_PORT
# (free ports), FG_ORIGIN_PORT, FG_TLS_CERT, FG_TLS_KEY and FG_THREADS.
floodgate_env() {
  export FG_TLS_PORT FG_ADMIN_PORT FG_ORIGIN_PORT=$origin_port FG_TLS_CERT=$cert FG_TLS_KEY=$key
  export FG_THREADS=$threads
  FG_TLS_PORT=$(free_port) FG_ADMIN_PORT=$(free_port)
}

# start_floodgate CONFIG: floodgate with CONFIG, its log in $out_dir/floodgate.log; sets
# fg_pid. 0 once its admin /readyz answers, 1 if it exits or is not ready in 10 s.
start_floodgate() {
  "$fg_bin" --config "$1" >"$out_dir/floodgate.log" 2>&1 & fg_pid=$!; pids+=("$fg_pid")
  wait_http "$fg_pid" 100 "http://127.0.0.1:$FG_ADMIN_PORT/readyz"
}

# floodgate_not_ready: the end of floodgate's log, then exit 1.
floodgate_not_ready() {
  note "floodgate did not become ready; its log ($out_dir/floodgate.log):"
  tail -n 20 "$out_dir/floodgate.log" | sed 's/^/    /' >&2
  exit 1
}

# nginx_dir: ng, nginx's prefix and temp directory (in tmp), and reuseport, the listen
# option NGINX_REUSEPORT=1 asks for (floodgate's SO_REUSEPORT model).
nginx_dir() {
  ng=$tmp/nginx
  mkdir -p "$ng"
  reuseport=
  [[ ${NGINX_REUSEPORT:-0} == 1 ]] && reuseport=" reuseport"
  return 0
}

# start_nginx CURL_ARGS...: nginx with $ng/nginx.conf (copied to the results), ready when
# the URL in CURL_ARGS answers; sets ng_pid; dies if it does not start within 5 s.
start_nginx() {
  cp "$ng/nginx.conf" "$out_dir/nginx.conf"
  "$nginx_bin" -p "$ng" -e "$out_dir/nginx-error.log" -c "$ng/nginx.conf" & ng_pid=$!; pids+=("$ng_pid")
  wait_http "$ng_pid" 50 "$@" ||
    { tail -n 20 "$out_dir/nginx-error.log" >&2; die "nginx did not start (see $out_dir/nginx-error.log)"; }
}

# nginx_conf_start WHAT: the start of every benchmark's nginx.conf, up to inside `http {`: a
# first comment saying WHAT, $threads workers, logs and temp paths in the run's directories,
# and keep-alive long enough that no load generator's connection is closed mid-run. The
# caller writes the rest.
nginx_conf_start() {
  cat <<CONF
# $1 (written by the script)
worker_processes $threads;
pid $ng/nginx.pid;
error_log $out_dir/nginx-error.log warn;
daemon off;
events { worker_connections 4096; }
http {
  client_body_temp_path $ng; proxy_temp_path $ng; fastcgi_temp_path $ng;
  uwsgi_temp_path $ng; scgi_temp_path $ng;
  keepalive_timeout 65s;
  keepalive_requests 1000000;
CONF
}

# nginx_conf_h2 EXTRA: what the HTTP/2 benchmarks (h2.sh, grpc.sh) add inside `http {`: no
# access log, floodgate's default streams per connection, EXTRA (more http-level
# directives), and the limit_req zone "one": one request a minute for the whole server (key
# $server_name), refused with 429 and logged below warn (a line per refusal would be
# measured too; floodgate logs none).
nginx_conf_h2() {
  cat <<CONF
  access_log off;
  http2_max_concurrent_streams 128;
  $1
  # (burst=0, nodelay's natural partner, is the default; nginx rejects it written out)
  limit_req_zone \$server_name zone=one:1m rate=1r/m;
  limit_req_status 429;
  limit_req_log_level info;
CONF
}

# meta KEY VALUE: one line of meta.txt (the run's details, read by the summary).
meta() { printf '%s\t%s\n' "$1" "$2" >>"$meta_file"; }

# meta_host: the run's date and machine (meta.txt's first lines).
meta_host() {
  meta date "$(date -Iseconds)"
  meta host "$(uname -sr), $(nproc) cpus"
}

# meta_floodgate: which floodgate was measured: its --version and the commit it was built
# from (noting uncommitted changes); nothing when only nginx is measured.
meta_floodgate() {
  [[ $fg_skip == 0 ]] || return 0
  meta floodgate "$("$fg_bin" --version 2>&1 | head -n1) ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet HEAD 2>/dev/null || echo ', uncommitted changes'))"
}

# meta_log_sizes: how long the three processes' logs grew (a log line per request would
# be measured too).
meta_log_sizes() {
  local f
  for f in nginx-error.log floodgate.log origin.log; do
    [[ -f $out_dir/$f ]] && meta "log_$f" "$(wc -l <"$out_dir/$f") lines"
  done
  return 0
}

proc_ticks() {  # user+system clock ticks of a process and its children (nginx: the workers)
  local p list
  list=("$1")
  while read -r p; do list+=("$p"); done < <(pgrep -P "$1" || true)
  for p in "${list[@]}"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}

# run_load COMMAND...: runs the load generator in the background, so that a signal to the
# script is handled at once (bench_cleanup stops it), and waits for it; its exit status.
# Redirect the call's output, not COMMAND's.
run_load() {
  local rc=0
  "$@" &
  load_pid=$!
  wait "$load_pid" || rc=$?
  load_pid=
  return "$rc"
}

# timed_run PID COMMAND...: one measured run: waits for an idle machine, runs COMMAND with
# the sampler on, and takes the CPU ticks of PID (the proxy) and of the origin around it.
# Sets run_noisy (1: a build or tests ran before or during it), run_proxy_ticks,
# run_origin_ticks and run_t0 / run_t1 (wall clock, seconds).
timed_run() {
  local pid=$1 p0 o0 p1 o1
  shift
  run_noisy=0
  wait_idle || run_noisy=1
  start_sampler
  p0=$(proc_ticks "$pid") o0=$(proc_ticks "$origin_pid") run_t0=$(date +%s.%N)
  "$@"
  p1=$(proc_ticks "$pid") o1=$(proc_ticks "$origin_pid") run_t1=$(date +%s.%N)
  if stop_sampler; then run_noisy=1; fi
  run_proxy_ticks=$((p1 - p0)) run_origin_ticks=$((o1 - o0))
}

# proxy_us_per_req REQUESTS: the proxy's CPU microseconds per request in the last timed_run.
proxy_us_per_req() {
  awk -v t="$run_proxy_ticks" -v n="$1" -v hz="$hz" 'BEGIN { printf "%.1f", n ? t / hz * 1e6 / n : 0 }'
}

# origin_cpu_pct: the origin's CPU in the last timed_run, in % of one core.
origin_cpu_pct() {
  awk -v t="$run_origin_ticks" -v a="$run_t0" -v b="$run_t1" -v hz="$hz" 'BEGIN { printf "%.0f", 100 * t / hz / (b - a) }'
}

# run_rounds RUNNER: warm-up (RUNNER SERVER SCENARIO SECONDS OUTFILE, each server and
# scenario for $warmup s), then $rounds rounds of `measure ROUND SERVER SCENARIO`, nginx and
# floodgate alternating, who goes first alternating by round.
run_rounds() {
  local runner=$1 r s sc order
  echo "results: $out_dir"
  wait_idle || true
  for s in "${servers[@]}"; do  # warm-up: the upstream pools, the allocators, the page cache
    for sc in "${scen_list[@]}"; do
      "$runner" "$s" "$sc" "$warmup" "$tmp/warmup.txt"
    done
  done
  for ((r = 1; r <= rounds; r++)); do
    order=("${servers[@]}")
    ((${#servers[@]} == 2 && r % 2 == 0)) && order=("${servers[1]}" "${servers[0]}")
    for sc in "${scen_list[@]}"; do
      for s in "${order[@]}"; do
        measure "$r" "$s" "$sc"
        sleep 1
      done
    done
  done
}

# parse_h2load FILE: tab-separated req/s, done, errored, timeout, 2xx 3xx 4xx 5xx, mean and max
# "time for request" in ms, the ALPN protocol, and the TLS parameters (last: it has spaces).
# h2load prints, among others:
#   finished in 10.00s, 12345.67 req/s, 1.23MB/s
#   requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
#   status codes: N 2xx, N 3xx, N 4xx, N 5xx
#   time for request:   min   max   mean   sd   +/- sd      (values with us, ms or s)
#   Application protocol: h2
parse_h2load() {
  awk '
    function ms(v,  n) { n = v + 0
      if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) ; else if (v ~ /s$/) n *= 1000
      return sprintf("%.3f", n) }
    /^finished in / { rps = $4 }
    /^requests: / { done = $6; errored = $12; tmo = $14 }
    /^status codes: / { s2 = $3; s3 = $5; s4 = $7; s5 = $9 }
    /^time for request:/ { mx = ms($5); mean = ms($6) }
    /^Application protocol:/ { proto = $3 }
    /^TLS Protocol:/ { tlsp = $3 }
    /^Cipher:/ { ciph = $2 }
    /^Server Temp Key:/ { tk = $4 " " $5 " " $6 }
    END { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rps, done + 0, errored + 0,
            tmo + 0, s2 + 0, s3 + 0, s4 + 0, s5 + 0, mean, mx, proto, tlsp == "" ? "" : tlsp " " ciph " " tk }
  ' "$1"
}
