#!/usr/bin/env bash
# A profile-guided build of the gateway example (`load` profile plus LLVM's PGO): an
# instrumented build serves a training workload on loopback, its counts are merged, and
# a second build lays out and inlines the code by them. What it buys is mostly
# instruction-cache locality: the request path runs through many small generic
# functions (the layers, hyper, h2, http, rustls), and without a profile the compiler
# cannot tell their hot parts from their cold ones.
#
#   bash benches/load/pgo.sh     # about 15 minutes: two fat-LTO builds and the training
#
# Prints the optimized binary's path: target/pgo/load/examples/gateway (under
# CARGO_TARGET_DIR). Measure it against HAProxy and the plain build in one run with
#
#   GATEWAY=target/pgo/load/examples/gateway BASELINE=target/load/examples/gateway \
#     RUNS=3 bash benches/load/run.sh
#
# The training is deliberately not the measured request alone: proxied reads of three
# resources (nodes, pods, one namespace's pods), a proxied request the backend answers
# 404, discovery (the gateway's own and the group's), and requests the authorizer denies, each
# over HTTP/1.1 and HTTP/2 (REQUESTS, 6000, is the count of each proxied read per
# protocol; the others get a sixth of it).
#
# Needs llvm-profdata of the toolchain's own LLVM: the script adds rustup's llvm-tools
# component when it is missing. The two builds use target directories of their own
# (target/pgo-train, target/pgo) so that this checkout's ordinary builds stay cached.
set -euo pipefail

NAME=pgo
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"
REQUESTS=${REQUESTS:-6000}
require_integers REQUESTS
((REQUESTS >= 6)) || die "REQUESTS must be at least 6"

need taskset util-linux
need curl
need python3
need_oha
HOST=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if [[ ! -x $PROFDATA ]]; then
  command -v rustup >/dev/null || die "llvm-profdata is missing ($PROFDATA) and rustup is not available"
  log "adding rustup's llvm-tools component (llvm-profdata)"
  rustup component add llvm-tools >&2
fi
[[ -x $PROFDATA ]] || die "llvm-profdata not found at $PROFDATA"

# The backend and the webhook are the ordinary load build.
build_examples load metrics_server load_pki
make_work pgo
# Fixed paths, so that a second run reuses the instrumented build and rustc sees a
# changed profile (it records the file among the build's inputs).
PROFRAW=$CARGO_TARGET_DIR/pgo-train/profraw
PROFILE_DATA=$CARGO_TARGET_DIR/pgo/gateway.profdata
rm -rf "$PROFRAW"
mkdir -p "$CARGO_TARGET_DIR/pgo"
log "building the instrumented gateway (target/pgo-train)"
(cd "$ROOT" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR/pgo-train RUSTFLAGS="-Cprofile-generate=$PROFRAW" \
  cargo build --profile load --quiet --example gateway) >&2

free_ports BACKEND_PORT POLICY_PORT GATEWAY_PORT
D=$WORK/pki
"$BIN/load_pki" write "$D" --backend-port "$BACKEND_PORT" --policy-port "$POLICY_PORT"
export RUST_LOG=${RUST_LOG:-warn}
backend_args
gateway_args
"$BIN/metrics_server" "${BACKEND_ARGS[@]}" 2>"$WORK/backend.log" &
PIDS+=($!)
"$BIN/load_pki" serve-policy "$D" --policy-port "$POLICY_PORT" 2>"$WORK/policy.log" &
PIDS+=($!)
# One CPU, as in run.sh: the gateway then runs tokio's single-threaded scheduler.
taskset -c 1 "$CARGO_TARGET_DIR/pgo-train/load/examples/gateway" "${GATEWAY_ARGS[@]}" \
  2>"$WORK/gateway.log" &
TRAIN_PID=$!
PIDS+=("$TRAIN_PID")

BASE=https://127.0.0.1:$GATEWAY_PORT
ADMIN=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
deadline=$((SECONDS + 60))
until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${ADMIN[@]}" "$BASE/apis") == 200 ]]; do
  ((SECONDS < deadline)) || die "the instrumented gateway did not answer; logs in $WORK"
  sleep 1
done
GROUP=/apis/metrics.k8s.io/v1beta1
SIXTH=$((REQUESTS / 6))
# train N STATUS PATH CLIENT...: N requests on each protocol, all answered STATUS.
train() {
  local n=$1 want=$2 path=$3 mode json got
  shift 3
  for mode in "-c 32 --http-version 1.1" "-c 4 -p 8 --http2"; do
    json=$WORK/oha.json
    # shellcheck disable=SC2086
    oha --no-tui -n "$n" $mode "$@" --output-format json "$BASE$path" >"$json"
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["statusCodeDistribution"].get(sys.argv[2], 0))' "$json" "$want")
    ((got == n)) || die "training: $path ($mode) answered $want to $got of $n requests; logs in $WORK"
  done
  log "trained: $path ($n x $want per protocol)"
}
train "$REQUESTS" 200 "$GROUP/nodes" "${ADMIN[@]}"
train "$REQUESTS" 200 "$GROUP/pods" "${ADMIN[@]}"
train "$REQUESTS" 200 "$GROUP/namespaces/kube-system/pods" "${ADMIN[@]}"
train "$SIXTH" 404 "$GROUP/nodes/no-such-node" "${ADMIN[@]}"
train "$SIXTH" 200 /apis "${ADMIN[@]}"
train "$SIXTH" 200 "$GROUP" "${ADMIN[@]}"
# The load user may read nodes and pods only: the authorizer denies services.
train "$SIXTH" 403 "$GROUP/namespaces/default/services" "${ADMIN[@]}"

# The profile is written when the process exits; the gateway stops on SIGINT.
kill -INT "$TRAIN_PID"
wait "$TRAIN_PID" || die "the instrumented gateway did not exit cleanly; logs in $WORK"
compgen -G "$PROFRAW/*.profraw" >/dev/null || die "the instrumented gateway wrote no profile"
"$PROFDATA" merge -o "$PROFILE_DATA" "$PROFRAW"/*.profraw

log "building the optimized gateway (target/pgo)"
(cd "$ROOT" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR/pgo RUSTFLAGS="-Cprofile-use=$PROFILE_DATA" \
  cargo build --profile load --quiet --example gateway) >&2
echo "$CARGO_TARGET_DIR/pgo/load/examples/gateway"
