#!/usr/bin/env bash
# Soak on loopback: the gateway example in front of the CRUD + watch extension server
# (examples/crud_server.rs), under a steady load of HTTP/1.1 and HTTP/2 clients at once
# plus long-lived watches, while the backend is killed (SIGKILL) and restarted and the
# proxy client certificate is rotated through its files. See benches/load/README.md.
#
#   bash benches/load/soak.sh                      # 10 minutes once built
#   DURATION=120 KILL_EVERY=20 bash benches/load/soak.sh
#
# Knobs (environment): DURATION seconds (600), RATE total req/s, split evenly between the
# HTTP/1.1 and the HTTP/2 client (3000), KILL_EVERY seconds between backend kills (30),
# DOWN seconds the backend stays down (3), ROTATE_EVERY seconds between proxy client
# certificate rotations (120), RECOVERY seconds within which every request after a
# restart must succeed (2), KEEP=1 keeps the work directory, OUT (a file to copy the
# report to). Exits 1 when the report misses the bar (below), 2 on a usage error.
#
# The bar: no answer but 200 outside the windows in which the backend is down (each
# from its kill to RECOVERY seconds after its restart, where 503 is the honest answer);
# every probe 200 from RECOVERY seconds after each restart on; no watch event cut in two;
# the gateway's RSS and open descriptors within 10% between minute 2 and the end.
set -euo pipefail
NAME=soak
DIE_STATUS=2
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"

defaults DURATION 600 RATE 3000 KILL_EVERY 30 DOWN 3 ROTATE_EVERY 120 RECOVERY 2 KEEP 0 OUT ''

require_integers DURATION RATE KILL_EVERY DOWN ROTATE_EVERY RECOVERY
((DURATION >= 60)) || die "DURATION must be at least 60 s (RSS is compared from minute 2 on a long run, from 1/5 of it on a short one)"
((KILL_EVERY > DOWN + RECOVERY)) || die "KILL_EVERY must exceed DOWN + RECOVERY"
((RATE >= 2)) || die "RATE must be at least 2"

need python3
need curl
need_oha
build_examples load gateway crud_server load_pki

make_work soak
BACKEND_PID=
free_ports BACKEND_PORT GATEWAY_PORT

# The load run's PKI; the APIService is the service catalog's, served by the CRUD server
# under the Service name the backend certificate carries.
D=$WORK/pki
"$BIN/load_pki" write "$D" --backend-port "$BACKEND_PORT" --policy-port 1
sed -e 's/name: v1beta1.metrics.k8s.io/name: v1beta1.servicecatalog.example.io/' \
  -e 's/group: metrics.k8s.io/group: servicecatalog.example.io/' \
  -e 's/k8s-app: metrics-server/k8s-app: servicecatalog/' \
  "$D/apiservices/metrics.k8s.io.yaml" >"$D/apiservices/servicecatalog.yaml"
rm "$D/apiservices/metrics.k8s.io.yaml"
cp "$D/front-proxy-client.crt" "$WORK/proxy.crt"
cp "$D/front-proxy-client.key" "$WORK/proxy.key"

export RUST_LOG=${RUST_LOG:-warn}
backend_args
start_backend() {
  "$BIN/crud_server" "${BACKEND_ARGS[@]}" --storage-file="$WORK/catalog.json" --bookmark-interval=10 2>>"$WORK/backend.log" &
  BACKEND_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null --cacert "$D/service-ca.crt" --cert "$D/front-proxy-client.crt" \
      --key "$D/front-proxy-client.key" "https://127.0.0.1:$BACKEND_PORT/healthz" && return 0
    sleep 0.05
  done
  die "the backend did not start; see $WORK/backend.log"
}
start_backend

"$BIN/gateway" --bind-address=127.0.0.1 --secure-port="$GATEWAY_PORT" \
  --tls-cert-file="$D/gateway.crt" --tls-private-key-file="$D/gateway.key" \
  --client-ca-file="$D/ca.crt" --anonymous-auth=false \
  --proxy-client-cert-file="$WORK/proxy.crt" --proxy-client-key-file="$WORK/proxy.key" \
  --certificate-reload-interval=5s \
  --apiservice-dir="$D/apiservices" --service-endpoints="$D/service-endpoints.yaml" \
  --authorization-mode=AlwaysAllow 2>"$WORK/gateway.log" &
GATEWAY_PID=$!
PIDS+=("$GATEWAY_PID")

CURL=(curl -s --cacert "$D/ca.crt" --cert "$D/admin.crt" --key "$D/admin.key")
GW="https://127.0.0.1:$GATEWAY_PORT"
NS_PATH=/apis/servicecatalog.example.io/v1beta1/namespaces/soak/serviceinstances
for _ in $(seq 200); do
  [[ $("${CURL[@]}" -o /dev/null -w '%{http_code}' "$GW$NS_PATH") == 200 ]] && break
  sleep 0.1
done
[[ $("${CURL[@]}" -o /dev/null -w '%{http_code}' "$GW$NS_PATH") == 200 ]] ||
  die "the service catalog is not served through the gateway; see $WORK/gateway.log"
"${CURL[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' "$GW$NS_PATH" -d '{
  "apiVersion": "servicecatalog.example.io/v1beta1", "kind": "ServiceInstance",
  "metadata": {"name": "soak-0"},
  "spec": {"clusterServiceClassExternalName": "redis", "clusterServicePlanExternalName": "small"}}'

T0=$(date +%s.%N)
elapsed() { python3 -c "print(round($(date +%s.%N) - $T0, 3))"; }

# Samples of the gateway's RSS (KiB) and open descriptors, every 10 s.
(
  while kill -0 "$GATEWAY_PID" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$GATEWAY_PID/status" 2>/dev/null || echo 0)
    fds=$(find "/proc/$GATEWAY_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    echo "$(date +%s.%N) $rss $fds"
    sleep 10
  done
) >"$WORK/resources.txt" &
PIDS+=($!)

TLS=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
URL="$GW$NS_PATH/soak-0"
HALF=$((RATE / 2))
log "soaking for ${DURATION}s: $RATE req/s (HTTP/1.1 and HTTP/2), 50 watches, a kill every ${KILL_EVERY}s, a rotation every ${ROTATE_EVERY}s"
oha --no-tui -z "${DURATION}s" -q "$HALF" -c 32 "${TLS[@]}" --output-format json "$URL" \
  >"$WORK/oha-h1.json" 2>"$WORK/oha-h1.err" &
OHA1=$!
oha --no-tui -z "${DURATION}s" -q "$HALF" -c 4 -p 8 --http2 "${TLS[@]}" --output-format json "$URL" \
  >"$WORK/oha-h2.json" 2>"$WORK/oha-h2.err" &
OHA2=$!
python3 "$ROOT/benches/load/soak_clients.py" "$GW" "$D/ca.crt" "$D/admin.crt" "$D/admin.key" \
  soak "$DURATION" "$WORK/clients.json" 2>"$WORK/clients.err" &
CLIENTS=$!
PIDS+=("$OHA1" "$OHA2" "$CLIENTS")

# The chaos: kills and restarts of the backend, rotations of the proxy client certificate.
: >"$WORK/events.txt"
next_kill=$KILL_EVERY
next_rotation=$ROTATE_EVERY
rotation=0
while :; do
  now=$(elapsed)
  python3 -c "import sys; sys.exit(0 if $now < $DURATION - $KILL_EVERY / 2 else 1)" || break
  if python3 -c "import sys; sys.exit(0 if $now >= $next_rotation else 1)"; then
    rotation=$((rotation % 5 + 1))
    # The key first, then the certificate: the gateway refuses the half-written pair and
    # keeps the last good one until both match.
    cp "$D/front-proxy-client-$rotation.key" "$WORK/proxy.key.new" && mv "$WORK/proxy.key.new" "$WORK/proxy.key"
    cp "$D/front-proxy-client-$rotation.crt" "$WORK/proxy.crt.new" && mv "$WORK/proxy.crt.new" "$WORK/proxy.crt"
    echo "$(date +%s.%N) rotate $rotation" >>"$WORK/events.txt"
    next_rotation=$((next_rotation + ROTATE_EVERY))
  fi
  if python3 -c "import sys; sys.exit(0 if $now >= $next_kill else 1)"; then
    echo "$(date +%s.%N) kill" >>"$WORK/events.txt"
    kill -KILL "$BACKEND_PID"
    wait "$BACKEND_PID" 2>/dev/null || true
    sleep "$DOWN"
    start_backend
    echo "$(date +%s.%N) restart" >>"$WORK/events.txt"
    next_kill=$((next_kill + KILL_EVERY))
  fi
  sleep 0.2
done
wait "$OHA1" "$OHA2" "$CLIENTS" || true
set +e +o pipefail

python3 - "$WORK" "$DURATION" "$RECOVERY" "$T0" <<'EOF' | tee "$WORK/report.md"
import json, sys
work, duration, recovery, t0 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ok = True
def fail(msg):
    global ok
    ok = False
    print(f"- **missed**: {msg}")

# Every time is Unix time; t0 is the start of the load.
events = [l.split() for l in open(f"{work}/events.txt")]
kills = [float(t) for t, e, *_ in events if e == "kill"]
restarts = [float(t) for t, e, *_ in events if e == "restart"]
rotations = [float(t) for t, e, *_ in events if e == "rotate"]
rel = lambda t: round(t - t0, 2)
windows = list(zip(kills, [r + recovery for r in restarts]))

print(f"## Soak: {duration:.0f} s, {len(kills)} backend kills, {len(rotations)} proxy certificate rotations\n")
print("| client | requests | per status | errors |\n|---|---:|---|---|")
for name in ("h1", "h2"):
    r = json.load(open(f"{work}/oha-{name}.json"))
    codes = r.get("statusCodeDistribution", {})
    # Requests still in flight when oha's duration ends are not answers.
    errors = {k: v for k, v in r.get("errorDistribution", {}).items() if k != "aborted due to deadline"}
    total = sum(codes.values()) + sum(errors.values())
    print(f"| oha {name} | {total} | {', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))} | "
          f"{', '.join(f'{k}: {v}' for k, v in errors.items()) or 'none'} |")
    # oha counts without timestamps: non-200 answers are judged by the probe; here the
    # only answers allowed at all are 200 and the honest 503.
    bad = {k: v for k, v in codes.items() if k not in ("200", "503")}
    if bad:
        fail(f"oha {name} got {bad}")
    # A backend that died answers through the gateway as 503, never as a cut connection.
    if errors:
        fail(f"oha {name}: errors {errors}")

c = json.load(open(f"{work}/clients.json"))
probe = c["probe"]
outside = [(t, s) for t, s in probe if s != 200 and not any(a <= t <= b for a, b in windows)]
print(f"\nProbe (one GET every 0.1 s on a new connection): {len(probe)} samples, "
      f"{sum(1 for _, s in probe if s == 200)} answered 200, "
      f"{len(outside)} not 200 outside the down windows.")
if outside:
    fail(f"probe answers outside the down windows (s from the start, status): {[(rel(t), s) for t, s in outside[:10]]}")
recoveries = []
for r in restarts:
    after = [(t, s) for t, s in probe if t >= r]
    first_ok = next((t for t, s in after if s == 200), None)
    recoveries.append(None if first_ok is None else round(first_ok - r, 2))
print(f"Seconds from each restart to the first 200: {recoveries}")
print(f"Writes (merge patch every 0.5 s): {c['writes']}")

w = c["watchers"]
keys = ["events", "bookmarks", "clean_ends", "between_events", "truncated", "gone", "unavailable", "connect_errors"]
print("\n| watches | " + " | ".join(keys) + " | streaming at the end |\n|---|" + "---:|" * (len(keys) + 1))
print(f"| {len(w)} | " + " | ".join(str(sum(x[k] for x in w)) for k in keys) +
      f" | {sum(1 for x in w if x['streaming_at_end'])} |")
if sum(x["truncated"] for x in w):
    fail("a watch event was cut in two")
if any(x["events"] == 0 for x in w):
    fail("a watch saw no event")

res = [tuple(map(float, l.split())) for l in open(f"{work}/resources.txt") if len(l.split()) == 3]
res = [(t - t0, rss, fds) for t, rss, fds in res]
start_at = min(120.0, duration / 5)
# From minute 2 (a fifth of a short run) while the load still runs.
window = [r for r in res if start_at <= r[0] <= duration - 2]
if len(window) >= 2:
    rss0, rss1 = window[0][1], window[-1][1]
    fd0, fd1 = window[0][2], window[-1][2]
    print(f"\nGateway from {window[0][0]:.0f} s to {window[-1][0]:.0f} s: RSS {rss0/1024:.1f} -> {rss1/1024:.1f} MiB "
          f"({(rss1/rss0-1)*100:+.1f}%), open descriptors {fd0:.0f} -> {fd1:.0f} ({(fd1/fd0-1)*100:+.1f}%), "
          f"peak RSS {max(r[1] for r in window)/1024:.1f} MiB")
    if rss1 > rss0 * 1.10:
        fail("RSS grew by more than 10%")
    if fd1 > fd0 * 1.10:
        fail("open descriptors grew by more than 10%")
else:
    fail("too few resource samples")
print("\nBar met." if ok else "\nBar missed.")
sys.exit(0 if ok else 1)
EOF
status=${PIPESTATUS[0]}
[[ -z $OUT ]] || cp "$WORK/report.md" "$OUT"
exit "$status"
