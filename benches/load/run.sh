#!/usr/bin/env bash
# Load run on loopback: the metrics backend called directly, through the kube-aggregator
# gateway example (release build), and through HAProxy, nginx and Go's
# httputil.ReverseProxy (goproxy/, the base of the Go aggregator's proxy) configured as the
# equivalent mTLS reverse proxy, each driven by oha. See benches/load/README.md for what is
# measured.
#
#   bash benches/load/run.sh              # one round, about 3 minutes
#   RUNS=3 bash benches/load/run.sh       # medians of three rounds, about 7.5 minutes once built
#
# Knobs (environment): RUNS (1), DURATION seconds per measured run (10), WARMUP seconds per
# path and protocol (3), RATE of the open-loop run in req/s (5000), LOADGEN_CPU (0) and
# SERVER_CPU (1) for taskset, KEEP=1 keeps the work directory, OUT (a file to copy the
# table to), PROFILE=<mode>-<path> (e.g. h2-gateway) records that path's proxy process
# with `perf record` during its measured runs and prints the hottest symbols (the build
# then uses the `profiling` profile: release with line tables; a GATEWAY= binary is
# recorded as it was built), BASELINE=<gateway binary>
# adds an earlier build of the gateway example (say, of the commit before a change) as
# the path `baseline`, with the same flags, measured in the same rounds: a before/after
# comparison that the machine's drift between runs cannot blur. GATEWAY=<gateway binary>
# measures that build as the path `gateway` instead of this checkout's (say, the
# profile-guided build of pgo.sh, with BASELINE set to the plain one). SYSCALLS=1 also counts the
# system calls of the backend and of the proxy during each measured run (`perf stat` on
# the raw_syscalls:sys_enter tracepoint) and adds a column per request for each; the
# counting costs each call a little, so the CPU figures of such a run are not the ones to
# quote. HAPROXY_HEADERS=aggregator has HAProxy write the gateway's whole header set
# (lib.sh says which); the bar is checked against the default configuration. ARGS adds
# gateway flags (split on spaces), e.g. ARGS=--yield-before-park. A last table splits each
# proxy's CPU per request into user time (its own code) and system time (the kernel's work
# for it), from the same /proc counters.
set -euo pipefail
NAME=load
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"

defaults RUNS 1 DURATION 10 WARMUP 3 RATE 5000 LOADGEN_CPU 0 SERVER_CPU 1 KEEP 0 SYSCALLS 0
defaults OUT '' PROFILE '' BASELINE '' GATEWAY '' ARGS ''

require_integers RUNS DURATION WARMUP RATE LOADGEN_CPU SERVER_CPU
check_haproxy_headers
[[ -z $BASELINE || -x $BASELINE ]] || die "BASELINE ($BASELINE) is not an executable file"
[[ -z $GATEWAY || -x $GATEWAY ]] || die "GATEWAY ($GATEWAY) is not an executable file"
# A path, not a name for taskset or valgrind to look up in PATH.
[[ -z $GATEWAY ]] || GATEWAY=$(realpath "$GATEWAY")
((RUNS >= 1 && DURATION >= 1)) || die "RUNS and DURATION must be at least 1"
[[ $LOADGEN_CPU != "$SERVER_CPU" ]] || die "LOADGEN_CPU and SERVER_CPU must differ"
ncpu=$(nproc --all)
((LOADGEN_CPU < ncpu && SERVER_CPU < ncpu)) ||
  die "CPUs $LOADGEN_CPU and $SERVER_CPU are needed; this machine has $ncpu"

# ---- tools -----------------------------------------------------------------------------

need nginx
need haproxy
need go golang-go
need taskset util-linux
need python3
need curl
need_oha
nginx -V 2>&1 | grep -q -- '--with-http_v2_module' || die "nginx was built without HTTP/2"
NGINX_VERSION=$(nginx -v 2>&1 | sed 's/.*nginx\///')
HAPROXY_VERSION=$(haproxy -v | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p')
GO_VERSION=$(go version | awk '{ print $3 }')

if [[ $SYSCALLS == 1 ]]; then
  need perf linux-perf
  perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1 ||
    die "SYSCALLS=1 needs perf's raw_syscalls:sys_enter tracepoint, which this kernel does not give"
fi
BUILD_PROFILE=load
if [[ -n $PROFILE ]]; then
  need perf linux-perf
  BUILD_PROFILE=profiling
fi
# A GATEWAY= build is measured as it is: this checkout's gateway is then not built.
EXAMPLES=(metrics_server load_pki)
[[ -n $GATEWAY ]] || EXAMPLES=(gateway "${EXAMPLES[@]}")
build_examples "$BUILD_PROFILE" "${EXAMPLES[@]}"

# ---- processes and cleanup -------------------------------------------------------------

make_work load
free_ports BACKEND_PORT GATEWAY_PORT NGINX_PORT HAPROXY_PORT POLICY_PORT BASELINE_PORT GO_PORT
log "building goproxy ($GO_VERSION)"
(cd "$ROOT/benches/load/goproxy" && go build -o "$WORK/goproxy" .) >&2

D=$WORK/pki
"$BIN/load_pki" write "$D" --backend-port "$BACKEND_PORT" --policy-port "$POLICY_PORT"

# Quieter than the default info level: nginx runs with access_log off.
export RUST_LOG=${RUST_LOG:-warn}

# Each server is started as `taskset ... &` directly (taskset execs it, and no function or
# subshell stands between), so $! is the server itself: its /proc times and the cleanup
# both need that pid.
backend_args
gateway_args
read -ra extra <<<"$ARGS"
GATEWAY_ARGS+=("${extra[@]}")
taskset -c "$SERVER_CPU" "$BIN/metrics_server" "${BACKEND_ARGS[@]}" 2>"$WORK/backend.log" &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")

taskset -c "$SERVER_CPU" "$BIN/load_pki" serve-policy "$D" --policy-port "$POLICY_PORT" \
  2>"$WORK/policy.log" &
POLICY_PID=$!
PIDS+=("$POLICY_PID")

taskset -c "$SERVER_CPU" "${GATEWAY:-$BIN/gateway}" "${GATEWAY_ARGS[@]}" 2>"$WORK/gateway.log" &
GATEWAY_PID=$!
PIDS+=("$GATEWAY_PID")

if [[ -n $BASELINE ]]; then
  # The same flags on its own port, the same webhook.
  GATEWAY_PORT=$BASELINE_PORT gateway_args
  GATEWAY_ARGS+=("${extra[@]}")
  taskset -c "$SERVER_CPU" "$BASELINE" "${GATEWAY_ARGS[@]}" 2>"$WORK/baseline.log" &
  BASELINE_PID=$!
  PIDS+=("$BASELINE_PID")
fi

# nginx as the same front proxy: mTLS from clients (users signed by the cluster CA), the
# user's CN/O passed as X-Remote-User/X-Remote-Group (client copies overwritten), the
# front-proxy client certificate towards the backend, whose serving certificate is
# verified against the service CA under the Service's DNS name, and kept-alive upstream
# connections. One worker: it has one core, like the gateway's one runtime worker.
cat >"$WORK/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx-body;
  proxy_temp_path $WORK/nginx-proxy;
  fastcgi_temp_path $WORK/nginx-fastcgi;
  uwsgi_temp_path $WORK/nginx-uwsgi;
  scgi_temp_path $WORK/nginx-scgi;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  map \$ssl_client_s_dn \$remote_user_cn { "~(^|,)CN=(?<cn>[^,]+)" \$cn; default ""; }
  map \$ssl_client_s_dn \$remote_group_o { "~(^|,)O=(?<o>[^,]+)" \$o; default ""; }
  upstream metrics_server {
    server 127.0.0.1:$BACKEND_PORT;
    keepalive 64;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT ssl http2;
    ssl_certificate $D/gateway.crt;
    ssl_certificate_key $D/gateway.key;
    ssl_client_certificate $D/ca.crt;
    ssl_verify_client on;
    ssl_protocols TLSv1.2 TLSv1.3;
    http2_max_concurrent_streams 128;
    location / {
      proxy_pass https://metrics_server;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
      proxy_set_header X-Remote-User \$remote_user_cn;
      proxy_set_header X-Remote-Group \$remote_group_o;
      proxy_ssl_certificate $D/front-proxy-client.crt;
      proxy_ssl_certificate_key $D/front-proxy-client.key;
      proxy_ssl_trusted_certificate $D/service-ca.crt;
      proxy_ssl_verify on;
      proxy_ssl_name metrics-server.kube-system.svc;
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;
    }
  }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$WORK" -e "$WORK/nginx-error.log" -c "$WORK/nginx.conf" 2>"$WORK/nginx-stderr.log" &
NGINX_PID=$!
PIDS+=("$NGINX_PID")

# HAProxy as the same front proxy (lib.sh says how it is configured).
write_haproxy_cfg "$WORK/haproxy.cfg" "$HAPROXY_PORT"
taskset -c "$SERVER_CPU" haproxy -db -f "$WORK/haproxy.cfg" 2>"$WORK/haproxy.log" &
HAPROXY_PID=$!
PIDS+=("$HAPROXY_PID")

# Go's httputil.ReverseProxy as the same front proxy (goproxy/main.go), on one core
# like the others.
GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$WORK/goproxy" -listen "127.0.0.1:$GO_PORT" \
  -backend "https://127.0.0.1:$BACKEND_PORT" -cert "$D/gateway.crt" -key "$D/gateway.key" \
  -client-ca "$D/ca.crt" -proxy-cert "$D/front-proxy-client.crt" \
  -proxy-key "$D/front-proxy-client.key" -backend-ca "$D/service-ca.crt" \
  -backend-name metrics-server.kube-system.svc 2>"$WORK/goproxy.log" &
GO_PID=$!
PIDS+=("$GO_PID")

REQ_PATH=/apis/metrics.k8s.io/v1beta1/nodes
USER_TLS=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
DIRECT_TLS=(--cert "$D/front-proxy-client.crt" --key "$D/front-proxy-client.key" --cacert "$D/service-ca.crt")
DIRECT_HEADERS=(-H "X-Remote-User: load-user" -H "X-Remote-Group: team")

target_url() {
  case $1 in
    direct) echo "https://127.0.0.1:$BACKEND_PORT$REQ_PATH" ;;
    gateway) echo "https://127.0.0.1:$GATEWAY_PORT$REQ_PATH" ;;
    baseline) echo "https://127.0.0.1:$BASELINE_PORT$REQ_PATH" ;;
    nginx) echo "https://127.0.0.1:$NGINX_PORT$REQ_PATH" ;;
    haproxy) echo "https://127.0.0.1:$HAPROXY_PORT$REQ_PATH" ;;
    go) echo "https://127.0.0.1:$GO_PORT$REQ_PATH" ;;
  esac
}
client_args() {
  case $1 in
    direct) printf '%s\n' "${DIRECT_TLS[@]}" "${DIRECT_HEADERS[@]}" ;;
    *) printf '%s\n' "${USER_TLS[@]}" ;;
  esac
}

# Every path must answer 200 before anything is measured (the gateway first has to see
# the APIService Available).
wait_ready() {
  local path=$1 deadline=$((SECONDS + 60)) code=""
  local -a args
  mapfile -t args < <(client_args "$path")
  # curl spells the CA flag like oha; headers pass through unchanged.
  while ((SECONDS < deadline)); do
    for pid in "${PIDS[@]}"; do
      kill -0 "$pid" 2>/dev/null || die "a server exited early; logs in $WORK"
    done
    code=$(curl -s -o "$WORK/ready-$path.json" -w '%{http_code}' --max-time 2 \
      "${args[@]}" "$(target_url "$path")" || true)
    [[ $code == 200 ]] && return 0
    sleep 0.2
  done
  die "$path did not answer 200 within 60 s (last status '$code'); logs in $WORK"
}
PATHS=(direct gateway haproxy nginx go)
[[ -z $BASELINE ]] || PATHS=(direct gateway baseline haproxy nginx go)
for p in "${PATHS[@]}"; do wait_ready "$p"; done
log "all paths answer 200 (backend :$BACKEND_PORT, gateway :$GATEWAY_PORT, haproxy :$HAPROXY_PORT, nginx :$NGINX_PORT, go :$GO_PORT)"

# ---- measuring -------------------------------------------------------------------------

CLK_TCK=$(getconf CLK_TCK)
# utime + stime of a process (all its threads), in clock ticks.
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# utime alone: the process's own code; the rest of ticks is the kernel's work for it.
user_ticks() { awk '{ sub(/^.*\) /, ""); print $12 }' "/proc/$1/stat"; }
nginx_pids() { echo "$NGINX_PID"; cat "/proc/$NGINX_PID/task/$NGINX_PID/children"; }
# The processes serving a path, as "label pid" lines.
servers() {
  echo "backend $BACKEND_PID"
  case $1 in
    gateway) echo "gateway $GATEWAY_PID"; echo "webhook $POLICY_PID" ;;
    baseline) echo "gateway $BASELINE_PID"; echo "webhook $POLICY_PID" ;;
    nginx) for pid in $(nginx_pids); do echo "nginx $pid"; done ;;
    haproxy) echo "haproxy $HAPROXY_PID" ;;
    go) echo "go $GO_PID" ;;
  esac
}

OHA_COMMON=(--no-tui --output-format json)
oha --help | grep -q -- '--output-format' || OHA_COMMON=(--no-tui --json)

mode_args() {
  case $1 in
    h1) echo "-c 32 --http-version 1.1" ;;
    h2) echo "-c 4 -p 8 --http2" ;;
    open) echo "-c 32 --http-version 1.1 -q $RATE --latency-correction" ;;
  esac
}

# run_oha PATH MODE SECONDS OUTFILE
run_oha() {
  local -a args
  mapfile -t args < <(client_args "$1")
  # shellcheck disable=SC2046
  timeout $(($3 + 30)) taskset -c "$LOADGEN_CPU" oha "${OHA_COMMON[@]}" -z "${3}s" \
    $(mode_args "$2") "${args[@]}" "$(target_url "$1")" >"$4"
}

RESULTS=$WORK/results.jsonl
: >"$RESULTS"
measure() {
  local run=$1 path=$2 mode=$3 out="$WORK/oha-$1-$2-$3.json"
  local -a labels pids before before_user
  local label pid
  while read -r label pid; do
    labels+=("$label")
    pids+=("$pid")
    before+=("$(ticks "$pid")")
    before_user+=("$(user_ticks "$pid")")
  done < <(servers "$path")
  local perf_pid=""
  if [[ $PROFILE == "$mode-$path" ]]; then
    perf record -F 999 -q -o "$WORK/perf-$run.data" -p "${pids[1]}" -- sleep "$DURATION" \
      2>>"$WORK/perf.log" &
    perf_pid=$!
  fi
  # System calls: the backend (pids[0]) and the proxy's processes (the rest) apart.
  local -a sys_pids=()
  if [[ $SYSCALLS == 1 ]]; then
    local part procs
    for part in backend proxy; do
      if [[ $part == backend ]]; then procs=${pids[0]}; else procs=$(IFS=,; echo "${pids[*]:1}"); fi
      [[ -n $procs ]] || continue
      perf stat -x, -e raw_syscalls:sys_enter -o "$WORK/sys-$run-$path-$mode-$part.csv" \
        -p "$procs" -- sleep "$DURATION" 2>/dev/null &
      sys_pids+=($!)
    done
  fi
  run_oha "$path" "$mode" "$DURATION" "$out"
  [[ -z $perf_pid ]] || wait "$perf_pid" || true
  for pid in "${sys_pids[@]}"; do wait "$pid" || true; done
  local cpu="{" user="{" i
  for i in "${!pids[@]}"; do
    local delta=$(($(ticks "${pids[$i]}") - before[i]))
    cpu+="\"${labels[$i]}:${pids[$i]}\": $delta,"
    delta=$(($(user_ticks "${pids[$i]}") - before_user[i]))
    user+="\"${labels[$i]}:${pids[$i]}\": $delta,"
  done
  cpu="${cpu%,}}"
  user="${user%,}}"
  local sys="{"
  if [[ $SYSCALLS == 1 ]]; then
    for part in backend proxy; do
      local f="$WORK/sys-$run-$path-$mode-$part.csv" n
      [[ -e $f ]] || continue
      n=$(awk -F, '/raw_syscalls:sys_enter/ { print $1 }' "$f")
      [[ $n =~ ^[0-9]+$ ]] && sys+="\"$part\": $n,"
    done
  fi
  sys="${sys%,}}"
  printf '{"run": %d, "path": "%s", "mode": "%s", "oha": "%s", "ticks": %s, "user_ticks": %s, "syscalls": %s}\n' \
    "$run" "$path" "$mode" "$out" "$cpu" "$user" "$sys" >>"$RESULTS"
  log "run $run $mode $path done"
}

log "warming up ($WARMUP s per path and protocol)"
for p in "${PATHS[@]}"; do
  for m in h1 h2; do run_oha "$p" "$m" "$WARMUP" "$WORK/warmup-$p-$m.json"; done
done

for run in $(seq "$RUNS"); do
  for mode in h1 h2 open; do
    for p in "${PATHS[@]}"; do measure "$run" "$p" "$mode"; done
  done
done

# ---- report ----------------------------------------------------------------------------

TABLE=$WORK/table.md
python3 - "$RESULTS" "$CLK_TCK" "$RUNS" "$DURATION" "$RATE" "$NGINX_VERSION" "$HAPROXY_VERSION" "$HAPROXY_HEADERS" "$GO_VERSION" >"$TABLE" <<'PY'
import json, statistics, sys

results_file, clk_tck, runs, duration, rate, nginx_version, haproxy_version, haproxy_headers, go_version = sys.argv[1:]
clk_tck = int(clk_tck)
rows = [json.loads(line) for line in open(results_file)]
problems = []

def load(row):
    with open(row["oha"]) as f:
        o = json.load(f)
    codes = o.get("statusCodeDistribution", {})
    ok = int(codes.get("200", 0))
    bad = {k: v for k, v in codes.items() if k != "200"}
    errors = o.get("errorDistribution", {})
    # oha counts requests cut off at the deadline as errors; they are not failures.
    errors = {k: v for k, v in errors.items() if "deadline" not in k}
    if bad or errors:
        problems.append(f"run {row['run']} {row['mode']} {row['path']}: status {bad} errors {errors}")
    secs = o["summary"]["total"]
    p = o["latencyPercentiles"]
    cpu, user = {}, {}
    for key, ticks in row["ticks"].items():
        label = key.split(":")[0]
        cpu[label] = cpu.get(label, 0.0) + ticks / clk_tck
    for key, ticks in row.get("user_ticks", {}).items():
        label = key.split(":")[0]
        user[label] = user.get(label, 0.0) + ticks / clk_tck
    return {
        "rps": ok / secs,
        "p50": p["p50"] * 1e3,
        "p99": p["p99"] * 1e3,
        "ok": ok,
        # CPU seconds per request, in microseconds.
        "cpu": {k: v / ok * 1e6 if ok else float("nan") for k, v in cpu.items()},
        # The user-space part of it.
        "user": {k: v / ok * 1e6 if ok else float("nan") for k, v in user.items()},
        # System calls per request (SYSCALLS=1), of the backend and of the proxy.
        "sys": {k: v / ok if ok else float("nan") for k, v in row.get("syscalls", {}).items()},
    }

per = {}
for row in rows:
    per.setdefault((row["mode"], row["path"]), []).append(load(row))

def med(values):
    return statistics.median(values)

summary = {}
for key, items in per.items():
    labels = sorted({l for it in items for l in it["cpu"]})
    cpu = {l: med([it["cpu"].get(l, 0.0) for it in items]) for l in labels}
    user = {l: med([it["user"].get(l, 0.0) for it in items]) for l in labels}

    def proxy_of(cpu):
        gateway = cpu.get("gateway", 0.0) + cpu.get("webhook", 0.0)
        return {"direct": 0.0, "gateway": gateway, "baseline": gateway,
                "nginx": cpu.get("nginx", 0.0), "haproxy": cpu.get("haproxy", 0.0),
                "go": cpu.get("go", 0.0)}[key[1]]
    proxy = proxy_of(cpu)
    summary[key] = {
        "rps": med([it["rps"] for it in items]),
        "p50": med([it["p50"] for it in items]),
        "p99": med([it["p99"] for it in items]),
        "backend": cpu.get("backend", 0.0),
        "proxy": proxy,
        "proxy_user": proxy_of(user),
        "total": med([sum(it["cpu"].values()) for it in items]),
        "sys": {part: med([it["sys"][part] for it in items if part in it["sys"]])
                for part in ("backend", "proxy") if any(part in it["sys"] for it in items)},
    }

def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"

counted = any(s["sys"] for s in summary.values())

def fmt_sys(s, part):
    return f"{s['sys'][part]:.2f}" if part in s["sys"] else "-"

titles = {"h1": "HTTP/1.1, 32 connections, closed loop",
          "h2": "HTTP/2, 4 connections x 8 streams, closed loop",
          "open": f"HTTP/1.1, 32 connections, open loop at {rate} req/s"}
print(f"Medians of {runs} run(s) of {duration} s; CPU is µs of CPU time per request "
      f"(utime+stime from /proc); HAProxy {haproxy_version} (HAPROXY_HEADERS={haproxy_headers}), "
      f"nginx {nginx_version}, Go {go_version} httputil.ReverseProxy (go).")
for mode in ("h1", "h2", "open"):
    print(f"\n{titles[mode]}\n")
    print("| path | req/s | p50 ms | p99 ms | backend CPU µs/req | proxy CPU µs/req | total CPU µs/req "
          "| req/s vs direct | req/s vs HAProxy | proxy CPU vs HAProxy | proxy CPU vs nginx "
          "| proxy CPU vs Go | total CPU vs direct | p50 vs HAProxy |" + (" backend syscalls/req | proxy syscalls/req |" if counted else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if counted else ""))
    d, h, n, g = (summary.get((mode, p)) for p in ("direct", "haproxy", "nginx", "go"))
    for path in ("direct", "gateway", "baseline", "haproxy", "nginx", "go"):
        s = summary.get((mode, path))
        if s is None:
            continue
        proxied = path != "direct"
        print(f"| {path} | {s['rps']:.0f} | {s['p50']:.3f} | {s['p99']:.3f} | {s['backend']:.1f} "
              f"| {s['proxy']:.1f} | {s['total']:.1f} | {ratio(s['rps'], d['rps'])} "
              f"| {ratio(s['rps'], h['rps'])} "
              f"| {ratio(s['proxy'], h['proxy']) if proxied else '-'} "
              f"| {ratio(s['proxy'], n['proxy']) if proxied else '-'} "
              f"| {ratio(s['proxy'], g['proxy']) if proxied else '-'} "
              f"| {ratio(s['total'], d['total'])} | {ratio(s['p50'], h['p50'])} |"
              + (f" {fmt_sys(s, 'backend')} | {fmt_sys(s, 'proxy')} |" if counted else ""))

print("\nThe proxy's CPU split: its own code (user) and the kernel's work for it (system), "
      "µs per request, closed loop\n")
print("| path | HTTP/1.1 user | system | user vs HAProxy | system vs HAProxy "
      "| HTTP/2 user | system | user vs HAProxy | system vs HAProxy |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in ("gateway", "baseline", "haproxy", "nginx", "go"):
    cells = []
    for mode in ("h1", "h2"):
        s, h = summary.get((mode, path)), summary.get((mode, "haproxy"))
        if s is None or h is None:
            cells += ["-"] * 4
            continue
        system, h_system = s["proxy"] - s["proxy_user"], h["proxy"] - h["proxy_user"]
        cells += [f"{s['proxy_user']:.1f}", f"{system:.1f}",
                  ratio(s["proxy_user"], h["proxy_user"]), ratio(system, h_system)]
    if any(c != "-" for c in cells):
        print(f"| {path} | " + " | ".join(cells) + " |")

def vs(peer, mode, field):
    ours, theirs = summary[(mode, "gateway")][field], summary[(mode, peer)][field]
    return ours / theirs if theirs else None

for key, s in summary.items():
    if key[1] != "direct" and s["proxy"] == 0:
        problems.append(f"{key[0]} {key[1]}: no CPU time recorded for the proxy process")
checks = [
    ("HTTP/1.1 proxy CPU/req gateway/HAProxy <= 1.00", vs("haproxy", "h1", "proxy"), 1.00, "le"),
    ("HTTP/2 proxy CPU/req gateway/HAProxy <= 1.00", vs("haproxy", "h2", "proxy"), 1.00, "le"),
    ("HTTP/1.1 req/s gateway/HAProxy >= 1.00", vs("haproxy", "h1", "rps"), 1.00, "ge"),
    ("HTTP/2 req/s gateway/HAProxy >= 1.00", vs("haproxy", "h2", "rps"), 1.00, "ge"),
    ("open-loop p50 gateway/HAProxy <= 1.00", vs("haproxy", "open", "p50"), 1.00, "le"),
    ("HTTP/1.1 proxy CPU/req gateway/nginx <= 0.80", vs("nginx", "h1", "proxy"), 0.80, "le"),
    ("HTTP/2 proxy CPU/req gateway/nginx <= 0.80", vs("nginx", "h2", "proxy"), 0.80, "le"),
    ("HTTP/1.1 proxy CPU/req gateway/Go <= 1.00", vs("go", "h1", "proxy"), 1.00, "le"),
    ("HTTP/2 proxy CPU/req gateway/Go <= 1.00", vs("go", "h2", "proxy"), 1.00, "le"),
]
if any(path == "baseline" for _, path in summary):
    print("\nThe gateway against the baseline build, same rounds\n")
    print("| mode | proxy CPU µs/req gateway / baseline | ratio | req/s ratio | p50 ratio |")
    print("|---|---:|---:|---:|---:|")
    for mode in ("h1", "h2", "open"):
        g, b = summary.get((mode, "gateway")), summary.get((mode, "baseline"))
        if g and b:
            print(f"| {mode} | {g['proxy']:.1f} / {b['proxy']:.1f} | {ratio(g['proxy'], b['proxy'])} "
                  f"| {ratio(g['rps'], b['rps'])} | {ratio(g['p50'], b['p50'])} |")
if haproxy_headers == "identity":
    print("\nThe bar (benches/load/README.md)\n")
else:
    print(f"\nThe bar's checks against HAProxy with HAPROXY_HEADERS={haproxy_headers} (for comparison: "
          "the bar itself is checked against the default, HAPROXY_HEADERS=identity)\n")
print("| check | measured | met |")
print("|---|---:|---|")
for name, value, bound, how in checks:
    if value is None:
        print(f"| {name} | - | not measured |")
        continue
    met = value <= bound if how == "le" else value >= bound
    print(f"| {name} | {value:.2f} | {'yes' if met else 'NO'} |")
if problems:
    print("\nNon-200 answers or errors (these runs are not valid):")
    for p in problems:
        print(f"- {p}")
PY
cat "$TABLE"
[[ -z $OUT ]] || cp "$TABLE" "$OUT"
if [[ -n $PROFILE ]]; then
  for data in "$WORK"/perf-*.data; do
    [[ -e $data ]] || continue
    printf '\nHottest symbols of %s (%s, self time)\n\n' "$PROFILE" "$(basename "$data")"
    perf report -i "$data" --no-children --sort dso,symbol --percent-limit 0.7 --stdio 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -60
  done
fi
