#!/usr/bin/env bash
# Instructions per proxied request, counted by valgrind's callgrind: the gateway example
# and HAProxy (configured as in run.sh) in front of the same metrics backend, for HTTP/1.1
# and HTTP/2 clients. Instruction counts do not depend on what else the machine does, so
# this run compares the proxies' work on a busy machine too; run.sh measures time.
#
#   bash benches/load/instructions.sh          # about 4 minutes once built
#
# Both proxies run on one CPU (SERVER_CPU, 1), as in run.sh: the gateway example then
# uses tokio's single-threaded scheduler, as it does there, and HAProxy has one thread.
#
# After the totals, a table splits each proxy's instructions by component (TLS, HTTP/2,
# header maps, the proxy's own logic, allocator, ...; cg_split.py).
#
# Knobs: REQUESTS per measured run (3000), TOP (25) rows of the gateway's inclusive
# profile to print, SERVER_CPU (1), KEEP=1 keeps the work directory (callgrind files
# included), GATEWAY=<gateway binary> counts that build instead of this checkout's
# `profiling` one (say, pgo.sh's), CACHE_SIM=1 also simulates the caches and prints
# instruction- and data-cache misses per request (valgrind's model of this machine's
# caches: a locality measure, not a timing), HAPROXY_HEADERS=aggregator has HAProxy write
# the gateway's whole header set (lib.sh), ARGS adds gateway flags (split on spaces), e.g.
# the audit log at Metadata level, to count what a feature costs per request:
#
#   ARGS="--audit-policy-file=policy.yaml --audit-log-path=/tmp/audit.log" \
#   bash benches/load/instructions.sh
set -euo pipefail

NAME=instructions
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"
defaults REQUESTS 3000 TOP 25 KEEP 0 SERVER_CPU 1 GATEWAY '' ARGS '' CACHE_SIM 0
require_integers REQUESTS TOP SERVER_CPU CACHE_SIM
check_haproxy_headers
[[ -z $GATEWAY || -x $GATEWAY ]] || die "GATEWAY ($GATEWAY) is not an executable file"
# A path, not a name for taskset or valgrind to look up in PATH.
[[ -z $GATEWAY ]] || GATEWAY=$(realpath "$GATEWAY")
ncpu=$(nproc --all)
((SERVER_CPU < ncpu)) || die "CPU $SERVER_CPU is needed (SERVER_CPU); this machine has $ncpu"

need valgrind
need taskset util-linux
need haproxy
need curl
need python3
need_oha
# A GATEWAY= build is measured as it is: this checkout's gateway is then not built.
EXAMPLES=(metrics_server load_pki)
[[ -n $GATEWAY ]] || EXAMPLES=(gateway "${EXAMPLES[@]}")
build_examples profiling "${EXAMPLES[@]}"

make_work instructions
free_ports BACKEND_PORT POLICY_PORT GATEWAY_PORT HAPROXY_PORT
start_backend_and_webhook ""
gateway_args
read -ra extra <<<"$ARGS"
GATEWAY_ARGS+=("${extra[@]}")

CALLGRIND=(valgrind --tool=callgrind)
((CACHE_SIM == 0)) || CALLGRIND+=(--cache-sim=yes)
taskset -c "$SERVER_CPU" "${CALLGRIND[@]}" --callgrind-out-file="$WORK/gateway.cg" "${GATEWAY:-$BIN/gateway}" \
  "${GATEWAY_ARGS[@]}" 2>"$WORK/gateway.log" &
GATEWAY_PID=$!
PIDS+=("$GATEWAY_PID")

# HAProxy configured as in run.sh (lib.sh).
write_haproxy_cfg "$WORK/haproxy.cfg" "$HAPROXY_PORT"
taskset -c "$SERVER_CPU" "${CALLGRIND[@]}" --callgrind-out-file="$WORK/haproxy.cg" haproxy -db -f "$WORK/haproxy.cfg" \
  2>"$WORK/haproxy.log" &
HAPROXY_PID=$!
PIDS+=("$HAPROXY_PID")

REQ_PATH=/apis/metrics.k8s.io/v1beta1/nodes
TLS=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
url() { echo "https://127.0.0.1:$1$REQ_PATH"; }
for port in "$GATEWAY_PORT" "$HAPROXY_PORT"; do
  deadline=$((SECONDS + 120))
  until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${TLS[@]}" "$(url "$port")") == 200 ]]; do
    ((SECONDS < deadline)) || die "port $port did not answer 200; logs in $WORK"
    sleep 1
  done
done

declare -A PID_OF=([gateway]=$GATEWAY_PID [haproxy]=$HAPROXY_PID)
declare -A PORT_OF=([gateway]=$GATEWAY_PORT [haproxy]=$HAPROXY_PORT)
# oha's flags for each protocol.
mode_args() {
  case $1 in
    h1) echo "-c 4 --http-version 1.1" ;;
    h2) echo "-c 2 -p 4 --http2" ;;
  esac
}
# totals of the last dump of a callgrind run
total_of() { awk '/^(summary|totals):/ { t = $2 } END { print t }' "$(ls -t "$1".* | head -1)"; }

printf 'HAProxy configured with HAPROXY_HEADERS=%s (lib.sh).\n\n' "$HAPROXY_HEADERS" >"$WORK/table.md"
[[ -z $ARGS ]] || printf 'Gateway flags added: %s\n\n' "$ARGS" >>"$WORK/table.md"
printf '| proxy | protocol | requests | instructions per request |\n|---|---|---:|---:|\n' >>"$WORK/table.md"
for proxy in gateway haproxy; do
  for mode in h1 h2; do
    read -ra args <<<"$(mode_args "$mode")"
    oha --no-tui -n 300 "${args[@]}" "${TLS[@]}" "$(url "${PORT_OF[$proxy]}")" >/dev/null
    callgrind_control -z "${PID_OF[$proxy]}" >/dev/null
    oha --no-tui -n "$REQUESTS" "${args[@]}" "${TLS[@]}" "$(url "${PORT_OF[$proxy]}")" \
      --output-format json >"$WORK/oha-$proxy-$mode.json"
    callgrind_control --dump="$proxy-$mode" "${PID_OF[$proxy]}" >/dev/null
    sleep 2
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["statusCodeDistribution"].get("200", 0))' "$WORK/oha-$proxy-$mode.json")
    total=$(total_of "$WORK/$proxy.cg")
    cp "$(ls -t "$WORK/$proxy.cg".* | head -1)" "$WORK/$proxy-$mode.cg"
    printf '| %s | %s | %s | %s |\n' "$proxy" "$mode" "$ok" "$((total / ok))" >>"$WORK/table.md"
    log "$proxy $mode: $ok requests, $((total / ok)) instructions each"
  done
done
cat "$WORK/table.md"
if ((CACHE_SIM)); then
  printf '\nCache misses per request (valgrind'"'"'s cache model):\n\n'
  python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
print("| proxy | protocol | L1 instruction misses | L1 data misses | last-level misses |")
print("|---|---|---:|---:|---:|")
for proxy in ("gateway", "haproxy"):
    for mode in ("h1", "h2"):
        events, totals = [], []
        for line in open(f"{work}/{proxy}-{mode}.cg"):
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                totals = [int(x) for x in line.split()[1:]]
        v = dict(zip(events, totals + [0] * (len(events) - len(totals))))
        oha = json.load(open(f"{work}/oha-{proxy}-{mode}.json"))
        ok = oha["statusCodeDistribution"].get("200", 0) or 1
        d1 = v.get("D1mr", 0) + v.get("D1mw", 0)
        ll = v.get("ILmr", 0) + v.get("DLmr", 0) + v.get("DLmw", 0)
        print(f"| {proxy} | {mode} | {v.get('I1mr', 0) // ok:,} | {d1 // ok:,} | {ll // ok:,} |")
PY
fi
printf '\nInstructions per request by component (each function'"'"'s own, cg_split.py):\n\n'
python3 "$(dirname "$0")/cg_split.py" "$REQUESTS" \
  "gateway HTTP/1.1=$WORK/gateway-h1.cg" "HAProxy HTTP/1.1=$WORK/haproxy-h1.cg" \
  "gateway HTTP/2=$WORK/gateway-h2.cg" "HAProxy HTTP/2=$WORK/haproxy-h2.cg" || true
printf '\nThe gateway over HTTP/2, inclusive instructions per request of its hottest frames:\n\n'
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/gateway-h2.cg" 2>/dev/null |
  grep -E '^ *[0-9,]+ \(' | grep -v 'PROGRAM TOTALS' |
  awk -v n="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["statusCodeDistribution"]["200"])' "$WORK/oha-gateway-h2.json")" \
    '{ v = $1; gsub(",", "", v); $1 = ""; printf "%8d %s\n", v / n, $0 }' |
  grep -E 'kube_aggregator|h2::|rustls|ring|hyper' | cut -c1-170 | head -"$TOP" || true
