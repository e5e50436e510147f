#!/usr/bin/env bash
# Instructions per proxied request, counted by valgrind's callgrind: the gateway example
# and HAProxy (configured as in run.sh) in front of the same metrics backend, for HTTP/1.1
# and HTTP/2 clients. Instruction counts do not depend on what else the machine does, so
# this run compares the proxies' work on a busy machine too; run.sh measures time.
#
#   bash benches/load/instructions.sh          # about 4 minutes once built
#
# Knobs: REQUESTS per measured run (3000), TOP (25) rows of the gateway's inclusive
# profile to print, KEEP=1 keeps the work directory (callgrind files included).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REQUESTS=${REQUESTS:-3000}
TOP=${TOP:-25}
KEEP=${KEEP:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export PATH="$PATH:$HOME/.cargo/bin:/usr/sbin:/sbin"
log() { printf '== %s\n' "$*" >&2; }
die() { printf 'instructions: %s\n' "$*" >&2; exit 1; }

apt_install() {
  command -v apt-get >/dev/null || die "$* missing and apt-get is not available"
  log "installing $* from Debian's packages"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}
command -v valgrind >/dev/null || apt_install valgrind
command -v haproxy >/dev/null || apt_install haproxy
command -v curl >/dev/null || apt_install curl
command -v oha >/dev/null || cargo install oha --locked >&2

log "building the examples (profiling: the load build with line tables)"
(cd "$ROOT" && cargo build --profile profiling --quiet --example gateway \
  --example metrics_server --example load_pki) >&2
BIN=$CARGO_TARGET_DIR/profiling/examples

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kube-aggregator-instructions.XXXXXX")
PIDS=()
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $KEEP == 1 || $status != 0 ]]; then log "work directory kept: $WORK"; else rm -rf "$WORK"; fi
  exit "$status"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
BACKEND_PORT=$(free_port)
POLICY_PORT=$(free_port)
GATEWAY_PORT=$(free_port)
HAPROXY_PORT=$(free_port)
D=$WORK/pki
"$BIN/load_pki" write "$D" --backend-port "$BACKEND_PORT" --policy-port "$POLICY_PORT"
export RUST_LOG=${RUST_LOG:-warn}

"$BIN/metrics_server" --bind-address=127.0.0.1 --secure-port="$BACKEND_PORT" \
  --tls-cert-file="$D/metrics-server.crt" --tls-private-key-file="$D/metrics-server.key" \
  --requestheader-client-ca-file="$D/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client 2>"$WORK/backend.log" &
PIDS+=($!)
"$BIN/load_pki" serve-policy "$D" --policy-port "$POLICY_PORT" 2>"$WORK/policy.log" &
PIDS+=($!)

valgrind --tool=callgrind --callgrind-out-file="$WORK/gateway.cg" "$BIN/gateway" \
  --bind-address=127.0.0.1 --secure-port="$GATEWAY_PORT" \
  --tls-cert-file="$D/gateway.crt" --tls-private-key-file="$D/gateway.key" \
  --client-ca-file="$D/ca.crt" --anonymous-auth=false \
  --proxy-client-cert-file="$D/front-proxy-client.crt" \
  --proxy-client-key-file="$D/front-proxy-client.key" \
  --apiservice-dir="$D/apiservices" --service-endpoints="$D/service-endpoints.yaml" \
  --authorization-mode=Webhook --authorization-webhook-config-file="$D/authz-webhook.kubeconfig" \
  --authorization-webhook-version=v1 2>"$WORK/gateway.log" &
GATEWAY_PID=$!
PIDS+=("$GATEWAY_PID")

cat "$D/gateway.crt" "$D/gateway.key" >"$WORK/haproxy-serving.pem"
cat "$D/front-proxy-client.crt" "$D/front-proxy-client.key" >"$WORK/haproxy-front-proxy.pem"
cat >"$WORK/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 8000
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  timeout http-keep-alive 300s
frontend gateway
  bind 127.0.0.1:$HAPROXY_PORT ssl crt $WORK/haproxy-serving.pem ca-file $D/ca.crt verify required alpn h2,http/1.1
  http-request del-header Authorization
  http-request del-header X-Remote-User
  http-request del-header X-Remote-Group
  http-request set-header X-Remote-User %[ssl_c_s_dn(CN)]
  http-request set-header X-Remote-Group %[ssl_c_s_dn(O)]
  default_backend metrics_server
backend metrics_server
  http-reuse always
  server metrics 127.0.0.1:$BACKEND_PORT ssl crt $WORK/haproxy-front-proxy.pem ca-file $D/service-ca.crt verify required verifyhost metrics-server.kube-system.svc sni str(metrics-server.kube-system.svc) alpn h2
EOF
valgrind --tool=callgrind --callgrind-out-file="$WORK/haproxy.cg" haproxy -db -f "$WORK/haproxy.cfg" \
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
MODE_h1="-c 4 --http-version 1.1"
MODE_h2="-c 2 -p 4 --http2"
# totals of the last dump of a callgrind run
total_of() { awk '/^(summary|totals):/ { t = $2 } END { print t }' "$(ls -t "$1".* | head -1)"; }

printf '| proxy | protocol | requests | instructions per request |\n|---|---|---:|---:|\n' >"$WORK/table.md"
for proxy in gateway haproxy; do
  for mode in h1 h2; do
    eval "args=\$MODE_$mode"
    # shellcheck disable=SC2086
    oha --no-tui -n 300 $args "${TLS[@]}" "$(url "${PORT_OF[$proxy]}")" >/dev/null
    callgrind_control -z "${PID_OF[$proxy]}" >/dev/null
    # shellcheck disable=SC2086
    oha --no-tui -n "$REQUESTS" $args "${TLS[@]}" "$(url "${PORT_OF[$proxy]}")" \
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
printf '\nThe gateway over HTTP/2, inclusive instructions per request of its hottest frames:\n\n'
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/gateway-h2.cg" 2>/dev/null |
  grep -E '^ *[0-9,]+ \(' | grep -v 'PROGRAM TOTALS' |
  awk -v n="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["statusCodeDistribution"]["200"])' "$WORK/oha-gateway-h2.json")" \
    '{ v = $1; gsub(",", "", v); $1 = ""; printf "%8d %s\n", v / n, $0 }' |
  grep -E 'kube_aggregator|h2::|rustls|ring|hyper' | cut -c1-170 | head -"$TOP" || true
