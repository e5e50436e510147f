#!/usr/bin/env bash
# Two builds of the gateway example against each other, in interleaved rounds: A, B, A,
# B, ... with the same backend, webhook, certificates and flags, each build measured for
# DURATION seconds per round, so that the machine's drift over a run falls on both
# alike. Prints each round's proxy CPU per request (utime+stime from /proc over the
# requests answered 200), the backend's CPU per request during that side's rounds, and
# the medians, with B/A.
#
#   A=<gateway binary> B=<gateway binary> bash benches/load/ab.sh   # about 2.5 minutes
#
# Typically B is this checkout's `target/load/examples/gateway` and A a build of an
# earlier commit (see README.md for building one in a worktree). Either side may instead
# be the word `haproxy`: HAProxy configured as in run.sh (lib.sh's write_haproxy_cfg, so
# HAPROXY_HEADERS applies), one thread on the same CPU, which makes this the interleaved
# form of run.sh's gateway/HAProxy CPU ratio:
#
#   A=haproxy B=target/load/examples/gateway MODE=h2 bash benches/load/ab.sh
#
# A_ARGS and B_ARGS add gateway flags to one side (split on spaces), so that one build
# can be measured against itself with a feature on, e.g. the audit log at Metadata level:
#
#   A=target/release/examples/gateway B=target/release/examples/gateway \
#   B_ARGS="--audit-policy-file=policy.yaml --audit-log-path=/tmp/audit.log" \
#   bash benches/load/ab.sh
#
# Knobs: MODE h1 (32 HTTP/1.1 connections) or h2 (4 connections x 8 streams), ROUNDS
# (6), DURATION seconds (5), WARMUP seconds per build (3), LOADGEN_CPU (0) for oha,
# SERVER_CPU (1) for both sides, BACKEND_CPU (LOADGEN_CPU) for the backend and the
# webhook. Unlike run.sh, the backend does not share the proxies' CPU by default: what
# is measured is each proxy's own CPU, and a backend beside it on one CPU made rounds of
# the same build differ by 10% and more on the development machine.
set -euo pipefail

NAME=ab
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"
defaults A '' B '' A_ARGS '' B_ARGS '' MODE h1 ROUNDS 6 DURATION 5 WARMUP 3
defaults LOADGEN_CPU 0 SERVER_CPU 1
defaults BACKEND_CPU "$LOADGEN_CPU"
require_integers ROUNDS DURATION WARMUP LOADGEN_CPU SERVER_CPU BACKEND_CPU
check_haproxy_headers
for x in "$A" "$B"; do
  [[ $x == haproxy || -x $x ]] || die "A and B must name gateway binaries or be haproxy (A='$A', B='$B')"
done
case $MODE in
  h1) OHA_MODE=(-c 32 --http-version 1.1) ;;
  h2) OHA_MODE=(-c 4 -p 8 --http2) ;;
  *) die "MODE must be h1 or h2, got '$MODE'" ;;
esac
((ROUNDS >= 1 && DURATION >= 1)) || die "ROUNDS and DURATION must be at least 1"
[[ $LOADGEN_CPU != "$SERVER_CPU" ]] || die "LOADGEN_CPU and SERVER_CPU must differ"

need taskset util-linux
need python3
need curl
need_oha
[[ $A != haproxy && $B != haproxy ]] || need haproxy
build_examples load metrics_server load_pki

make_work ab
free_ports BACKEND_PORT POLICY_PORT PORT_A PORT_B
start_backend_and_webhook "$BACKEND_CPU"
declare -A PID_OF PORT_OF=([A]=$PORT_A [B]=$PORT_B) BINARY_OF=([A]=$A [B]=$B) \
  ARGS_OF=([A]=$A_ARGS [B]=$B_ARGS)
for x in A B; do
  if [[ ${BINARY_OF[$x]} == haproxy ]]; then
    write_haproxy_cfg "$WORK/haproxy-$x.cfg" "${PORT_OF[$x]}"
    taskset -c "$SERVER_CPU" haproxy -db -f "$WORK/haproxy-$x.cfg" 2>"$WORK/haproxy-$x.log" &
  else
    GATEWAY_PORT=${PORT_OF[$x]} gateway_args
    read -ra extra <<<"${ARGS_OF[$x]}"
    GATEWAY_ARGS+=("${extra[@]}")
    taskset -c "$SERVER_CPU" "${BINARY_OF[$x]}" "${GATEWAY_ARGS[@]}" 2>"$WORK/gateway-$x.log" &
  fi
  PID_OF[$x]=$!
  PIDS+=($!)
done

TLS=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
url() { echo "https://127.0.0.1:$1/apis/metrics.k8s.io/v1beta1/nodes"; }
for x in A B; do
  deadline=$((SECONDS + 60))
  until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${TLS[@]}" "$(url "${PORT_OF[$x]}")") == 200 ]]; do
    ((SECONDS < deadline)) || die "$x (${BINARY_OF[$x]}) did not answer 200; logs in $WORK"
    sleep 1
  done
  taskset -c "$LOADGEN_CPU" oha --no-tui -z "${WARMUP}s" "${OHA_MODE[@]}" "${TLS[@]}" \
    "$(url "${PORT_OF[$x]}")" >/dev/null
done

CLK_TCK=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks.
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
: >"$WORK/rounds"
for round in $(seq 1 "$ROUNDS"); do
  for x in A B; do
    before=$(ticks "${PID_OF[$x]}")
    backend_before=$(ticks "$BACKEND_PID")
    taskset -c "$LOADGEN_CPU" oha --no-tui -z "${DURATION}s" "${OHA_MODE[@]}" "${TLS[@]}" \
      "$(url "${PORT_OF[$x]}")" --output-format json >"$WORK/oha.json"
    after=$(ticks "${PID_OF[$x]}")
    backend_after=$(ticks "$BACKEND_PID")
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["statusCodeDistribution"].get("200", 0))' "$WORK/oha.json")
    ((ok > 0)) || die "$x (${BINARY_OF[$x]}) answered no 200 in round $round; logs in $WORK"
    echo "$round $x $ok $((after - before)) $((backend_after - backend_before))" >>"$WORK/rounds"
  done
done

[[ -z $A_ARGS ]] || echo "A flags added: $A_ARGS"
[[ -z $B_ARGS ]] || echo "B flags added: $B_ARGS"
python3 - "$WORK/rounds" "$CLK_TCK" "$MODE" "$DURATION" "$A" "$B" "$HAPROXY_HEADERS" <<'PY'
import statistics, sys
path, tck, mode, duration, a_name, b_name, headers = sys.argv[1:8]
tck = int(tck)
for side, name in (("A", a_name), ("B", b_name)):
    extra = f" (HAPROXY_HEADERS={headers})" if name == "haproxy" else ""
    print(f"{side}: {name}{extra}")
print()
rows = [line.split() for line in open(path)]
us = {"A": [], "B": []}
rps = {"A": [], "B": []}
backend = {"A": [], "B": []}
print(f"{mode}, {duration} s per build per round; CPU in µs per request (the backend's: "
      "during that side's rounds)\n")
print("| round | A µs/req | B µs/req | B/A | A req/s | B req/s | backend µs/req via A | via B |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
by_round = {}
for r, x, ok, ticks, backend_ticks in rows:
    cpu = int(ticks) / tck * 1e6 / int(ok)
    be = int(backend_ticks) / tck * 1e6 / int(ok)
    us[x].append(cpu)
    rps[x].append(int(ok) / float(duration))
    backend[x].append(be)
    by_round.setdefault(int(r), {})[x] = (cpu, int(ok) / float(duration), be)
for r in sorted(by_round):
    (a, ar, abe), (b, br, bbe) = by_round[r]["A"], by_round[r]["B"]
    print(f"| {r} | {a:.1f} | {b:.1f} | {b / a:.3f} | {ar:.0f} | {br:.0f} | {abe:.1f} | {bbe:.1f} |")
ma, mb = statistics.median(us["A"]), statistics.median(us["B"])
ratios = [by_round[r]["B"][0] / by_round[r]["A"][0] for r in by_round]
print(f"| median | {ma:.1f} | {mb:.1f} | {statistics.median(ratios):.3f} | "
      f"{statistics.median(rps['A']):.0f} | {statistics.median(rps['B']):.0f} | "
      f"{statistics.median(backend['A']):.1f} | {statistics.median(backend['B']):.1f} |")
wins = sum(1 for q in ratios if q < 1)
print(f"\nB used less CPU per request than A in {wins} of {len(ratios)} rounds.")
PY
