#!/usr/bin/env bash
# A profile-guided build of the gateway example (`load` profile plus LLVM's PGO): an
# instrumented build serves a training workload on loopback, its counts are merged, and
# a second build inlines, lays out and splits the code by them. The request path runs
# through many small generic functions (the layers, hyper, h2, http, rustls), and
# without a profile the compiler cannot tell their hot parts from their cold ones: on
# the load run the profile cut both the instructions per request and the (simulated)
# instruction-cache misses (README.md, "A profile-guided build").
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
# (target/pgo-train, target/pgo) so that this checkout's ordinary builds stay cached;
# both add their flag to RUSTFLAGS, whose other flags apply as to any build. Knobs:
# REQUESTS (6000), SERVER_CPU (1) for the instrumented gateway, KEEP=1 keeps the work
# directory (the raw profile and the servers' logs).
set -euo pipefail

NAME=pgo
# shellcheck source=benches/load/lib.sh
source "$(dirname "$0")/lib.sh"
defaults REQUESTS 6000 SERVER_CPU 1
require_integers REQUESTS SERVER_CPU
((REQUESTS >= 6)) || die "REQUESTS must be at least 6"
ncpu=$(nproc --all)
((SERVER_CPU < ncpu)) || die "CPU $SERVER_CPU is needed (SERVER_CPU); this machine has $ncpu"

need taskset util-linux
need curl
need python3
need_oha
# The LLVM of the compiler cargo uses in this checkout (a toolchain override there
# included), so that the profile's format is the one the optimized build reads.
RUSTC=${RUSTC:-rustc}
HOST=$(cd "$ROOT" && "$RUSTC" -vV | sed -n 's/^host: //p')
PROFDATA=$(cd "$ROOT" && "$RUSTC" --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if [[ ! -x $PROFDATA ]]; then
  command -v rustup >/dev/null || die "llvm-profdata is missing ($PROFDATA) and rustup is not available"
  log "adding rustup's llvm-tools component (llvm-profdata)"
  (cd "$ROOT" && rustup component add llvm-tools) >&2
fi
[[ -x $PROFDATA ]] || die "llvm-profdata not found at $PROFDATA"

# The backend and the webhook are the ordinary load build.
build_examples load metrics_server load_pki
make_work pgo
# Fixed paths, so that a second run reuses the instrumented build and rustc sees a
# changed profile (it records the file among the build's inputs). The instrumented
# build scripts and proc macros write their own counts under target/pgo-train while
# cargo runs; the gateway writes its counts to the work directory (LLVM_PROFILE_FILE
# below), and only those are merged.
PROFILE_DATA=$CARGO_TARGET_DIR/pgo/gateway.profdata
OPTIMIZED=$CARGO_TARGET_DIR/pgo/load/examples/gateway
# Nothing of an earlier run may pass for this one's result if this one fails.
rm -f "$PROFILE_DATA" "$OPTIMIZED"
mkdir -p "$CARGO_TARGET_DIR/pgo"
log "building the instrumented gateway (target/pgo-train)"
TRAIN_DIR=$CARGO_TARGET_DIR/pgo-train
(cd "$ROOT" && CARGO_TARGET_DIR=$TRAIN_DIR RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$TRAIN_DIR/profraw" \
  cargo build --profile load --quiet --example gateway) >&2

free_ports BACKEND_PORT POLICY_PORT GATEWAY_PORT
start_backend_and_webhook ""
gateway_args
# One CPU, as in run.sh: the gateway then runs tokio's single-threaded scheduler.
LLVM_PROFILE_FILE=$WORK/profraw/gateway-%p.profraw taskset -c "$SERVER_CPU" \
  "$TRAIN_DIR/load/examples/gateway" "${GATEWAY_ARGS[@]}" 2>"$WORK/gateway.log" &
TRAIN_PID=$!
PIDS+=("$TRAIN_PID")

BASE=https://127.0.0.1:$GATEWAY_PORT
ADMIN=(--cert "$D/admin.crt" --key "$D/admin.key" --cacert "$D/ca.crt")
GROUP=/apis/metrics.k8s.io/v1beta1
# A proxied read, not the gateway's own discovery: it answers 503 until the APIService
# is Available.
deadline=$((SECONDS + 60))
until [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${ADMIN[@]}" "$BASE$GROUP/nodes") == 200 ]]; do
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || die "a server exited before the gateway answered; logs in $WORK"
  done
  ((SECONDS < deadline)) || die "the instrumented gateway did not answer 200 within 60 s; logs in $WORK"
  sleep 1
done
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
# Reaped: the cleanup must not signal whatever process gets its number next.
running=()
for pid in "${PIDS[@]}"; do [[ $pid == "$TRAIN_PID" ]] || running+=("$pid"); done
PIDS=("${running[@]}")
compgen -G "$WORK/profraw/*.profraw" >/dev/null || die "the instrumented gateway wrote no profile"
"$PROFDATA" merge -o "$PROFILE_DATA" "$WORK"/profraw/*.profraw

log "building the optimized gateway (target/pgo)"
(cd "$ROOT" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR/pgo RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$PROFILE_DATA" \
  cargo build --profile load --quiet --example gateway) >&2
echo "$OPTIMIZED"
