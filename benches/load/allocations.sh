#!/usr/bin/env bash
# Where the gateway's heap allocations per proxied request come from: the gateway example
# under valgrind's DHAT, in front of the metrics backend, for HTTP/1.1 and HTTP/2 clients
# (as instructions.sh sets them up), then each allocation site that runs about once or
# more per request, with its call stack's first frames (dhat_sites.py). The count itself
# is `cargo bench --bench allocations`; this says which code makes it.
#
#   bash benches/load/allocations.sh          # about 5 minutes once built
#
# The gateway is built with `--cfg system_allocator` (into target/system-allocator), so
# that it keeps the system allocator, whose calls DHAT sees (mimalloc's it does not).
# Knobs: REQUESTS per protocol (2000), SERVER_CPU (1), KEEP=1 keeps the work directory
# (the DHAT files included; open them in valgrind's dh_view.html).
set -euo pipefail

NAME=allocations
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"
need valgrind
defaults REQUESTS 2000 KEEP 0 SERVER_CPU 1
require_integers REQUESTS SERVER_CPU
need taskset util-linux
need curl
need python3
need_oha

build_examples profiling metrics_server load_pki
log "building the gateway with the system allocator (target/system-allocator)"
RUSTFLAGS="--cfg system_allocator" cargo build --release --example gateway \
  --target-dir "$ROOT/target/system-allocator" >&2
GATEWAY_BIN=$ROOT/target/system-allocator/release/examples/gateway

make_work allocations
free_ports BACKEND_PORT POLICY_PORT GATEWAY_PORT
start_backend_and_webhook ""
gateway_args

REQ_PATH=/apis/metrics.k8s.io/v1beta1/nodes
TLS=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
URL="https://127.0.0.1:$GATEWAY_PORT$REQ_PATH"
for mode in h1 h2; do
  taskset -c "$SERVER_CPU" valgrind --tool=dhat --dhat-out-file="$WORK/dhat-$mode.json" \
    "$GATEWAY_BIN" "${GATEWAY_ARGS[@]}" 2>"$WORK/gateway-$mode.log" &
  pid=$!
  PIDS+=("$pid")
  deadline=$((SECONDS + 120))
  until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${TLS[@]}" "$URL") == 200 ]]; do
    ((SECONDS < deadline)) || die "the gateway did not answer 200; logs in $WORK"
    sleep 1
  done
  case $mode in
    h1) args=(-c 4 --http-version 1.1) ;;
    h2) args=(-c 2 -p 4 --http2) ;;
  esac
  oha --no-tui -n "$REQUESTS" "${args[@]}" "${TLS[@]}" "$URL" >/dev/null
  # DHAT writes its file when the process exits.
  kill -INT "$pid"
  wait "$pid" || true
  log "$mode: $REQUESTS requests"
  printf '\n%s, %s requests (and the first one):\n\n' "$mode" "$REQUESTS"
  python3 "$(dirname "$0")/dhat_sites.py" "$WORK/dhat-$mode.json" "$((REQUESTS + 1))"
done
