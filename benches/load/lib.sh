# What run.sh, instructions.sh, ab.sh, pgo.sh and soak.sh share: messages, tool installs, the examples'
# build, the work directory with its process cleanup, free ports, and the HAProxy and
# gateway configurations every comparison uses. Sourced, never run:
#
#   NAME=load source "$(dirname "$0")/lib.sh"     # NAME prefixes die's message
#
# Sets ROOT (the repository), CARGO_TARGET_DIR (ROOT/target unless set) and PATH (cargo's
# bin and sbin added). DIE_STATUS (1) is the exit status of die.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
export PATH="$PATH:$HOME/.cargo/bin:/usr/sbin:/sbin"
DIE_STATUS=${DIE_STATUS:-1}

# defaults NAME VALUE...: each NAME the environment leaves unset or empty becomes VALUE.
defaults() {
  while (($# >= 2)); do
    printf -v "$1" '%s' "${!1:-$2}"
    shift 2
  done
}

log() { printf '== %s\n' "$*" >&2; }
die() {
  printf '%s: %s\n' "${NAME:-load}" "$*" >&2
  exit "$DIE_STATUS"
}

# Every named variable is a non-negative integer, or die naming it.
require_integers() {
  local n
  for n in "$@"; do
    [[ ${!n} =~ ^[0-9]+$ ]] || die "$n must be a non-negative integer, got '${!n}'"
  done
}

# apt_install PACKAGE...: from Debian's packages, `apt-get update` once per run.
apt_install() {
  command -v apt-get >/dev/null || die "$* missing and apt-get is not available"
  log "installing $* from Debian's packages"
  if [[ ${APT_UPDATED:-0} != 1 ]]; then
    apt-get update -qq >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# need COMMAND [PACKAGE]: installs PACKAGE (default COMMAND) when COMMAND is missing.
need() {
  command -v "$1" >/dev/null || apt_install "${2:-$1}"
}

# oha, the load generator: it presents a client certificate (h2load and wrk cannot).
need_oha() {
  if ! command -v oha >/dev/null; then
    log "installing oha with cargo install --locked"
    cargo install oha --locked >&2
  fi
  oha --help | grep -q -- '--cert' || die "this oha ($(oha --version)) has no --cert; upgrade it"
}

# build_examples PROFILE EXAMPLE...: builds them and sets BIN to their directory.
build_examples() {
  local profile=$1 args=() e
  shift
  for e in "$@"; do args+=(--example "$e"); done
  log "building the examples ($profile: ${*})"
  (cd "$ROOT" && cargo build --profile "$profile" --quiet "${args[@]}") >&2
  BIN=$CARGO_TARGET_DIR/$profile/examples
}

# make_work KIND: a fresh WORK directory, removed at exit unless KEEP=1 or the run
# failed. Every pid in PIDS, and BACKEND_PID when set (a backend the run restarts), gets
# SIGTERM at exit, then SIGKILL after up to 5 s (valgrind needs the time to write its
# output).
make_work() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/kube-aggregator-$1.XXXXXX")
  PIDS=()
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
cleanup() {
  local status=$? pid alive
  trap - EXIT INT TERM
  local all=("${PIDS[@]}" ${BACKEND_PID:-})
  for pid in "${all[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${all[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 || $status != 0 ]]; then
    log "work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$status"
}

# free_ports VAR...: a distinct free loopback port in each variable.
free_ports() {
  local ports n i=0
  mapfile -t ports < <(python3 - "$#" <<'PYEOF'
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
for s in held:
    print(s.getsockname()[1])
PYEOF
  )
  ((${#ports[@]} == $#)) || die "could not pick $# free ports"
  for n in "$@"; do
    printf -v "$n" '%s' "${ports[i]}"
    i=$((i + 1))
  done
}

# write_haproxy_cfg FILE PORT: HAProxy as the same front proxy as the gateway: mTLS from
# clients (users signed by the cluster CA), X-Remote-User/X-Remote-Group from the client
# certificate's CN and O (client copies and Authorization removed), the front-proxy
# certificate towards the backend over HTTP/2, verified as the Service's DNS name,
# connections shared between client connections ("http-reuse always"). One thread: it
# gets one core, like the gateway's one runtime worker. Needs D (the load_pki directory),
# WORK and BACKEND_PORT.
#
# HAPROXY_HEADERS chooses what HAProxy writes. `identity` (the default) is the
# configuration above: the identity headers only. `aggregator` also writes every other
# header the gateway writes, with the same values: a second X-Remote-Group
# (system:authenticated), X-Remote-Extra-Authentication.kubernetes.io%2fcredential-id
# (X509SHA256= and the client certificate's SHA-256, computed once per connection),
# X-Forwarded-For, -Proto, -Uri and -Host, Host set to the backend, a fresh UUID as
# Audit-Id on the request and on the response, and Cache-Control (no-cache, private) on
# the response. Both proxies then send the backend the same header
# fields and the client the same ones back (the values are the gateway's for the measured
# request; benches/load/README.md says where other requests differ), which separates what
# kube-apiserver's headers cost from what each implementation costs. check_haproxy_headers
# sets the default and stops a run with any other value before anything is built or
# started; the scripts call it first and read HAPROXY_HEADERS as set from then on.
check_haproxy_headers() {
  HAPROXY_HEADERS=${HAPROXY_HEADERS:-identity}
  case $HAPROXY_HEADERS in
    identity | aggregator) ;;
    *) die "HAPROXY_HEADERS must be identity or aggregator, got '$HAPROXY_HEADERS'" ;;
  esac
}

write_haproxy_cfg() {
  cat "$D/gateway.crt" "$D/gateway.key" >"$WORK/haproxy-serving.pem"
  cat "$D/front-proxy-client.crt" "$D/front-proxy-client.key" >"$WORK/haproxy-front-proxy.pem"
  local same_headers=""
  check_haproxy_headers
  if [[ $HAPROXY_HEADERS == aggregator ]]; then
    same_headers="  option forwardfor
  http-request set-var(txn.audit_id) uuid
  http-request set-header Audit-Id %[var(txn.audit_id)]
  http-request add-header X-Remote-Group system:authenticated
  http-request set-var(sess.credential_id) ssl_c_der,sha2(256),hex,lower unless { var(sess.credential_id) -m found }
  http-request set-header X-Remote-Extra-Authentication.kubernetes.io%2fcredential-id X509SHA256=%[var(sess.credential_id)]
  http-request set-header X-Forwarded-Proto https
  http-request set-header X-Forwarded-Uri %[path]
  http-request set-header X-Forwarded-Host 127.0.0.1:$BACKEND_PORT
  http-request set-header Host 127.0.0.1:$BACKEND_PORT
  http-response set-header Audit-Id %[var(txn.audit_id)]
  http-response set-header Cache-Control \"no-cache, private\""
  fi
  cat >"$1" <<EOF
global
  nbthread 1
  maxconn 8000
  ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 300s
  timeout server 300s
  timeout http-keep-alive 300s
frontend gateway
  bind 127.0.0.1:$2 ssl crt $WORK/haproxy-serving.pem ca-file $D/ca.crt verify required alpn h2,http/1.1
  http-request del-header Authorization
  http-request del-header X-Remote-User
  http-request del-header X-Remote-Group
  http-request set-header X-Remote-User %[ssl_c_s_dn(CN)]
  http-request set-header X-Remote-Group %[ssl_c_s_dn(O)]
$same_headers
  default_backend metrics_server
backend metrics_server
  http-reuse always
  server metrics 127.0.0.1:$BACKEND_PORT ssl crt $WORK/haproxy-front-proxy.pem ca-file $D/service-ca.crt verify required verifyhost metrics-server.kube-system.svc sni str(metrics-server.kube-system.svc) alpn h2
EOF
}

# start_backend_and_webhook [CPU]: writes load_pki's files to D ($WORK/pki) and starts the
# metrics backend and the SubjectAccessReview webhook (both pinned to CPU when one is
# given), their pids added to PIDS and their logs in WORK (backend.log, policy.log).
# Needs BIN, WORK, BACKEND_PORT and POLICY_PORT; sets D, BACKEND_ARGS and BACKEND_PID,
# and exports RUST_LOG (warn) unless it is set.
start_backend_and_webhook() {
  local pin=()
  [[ -z ${1:-} ]] || pin=(taskset -c "$1")
  D=$WORK/pki
  "$BIN/load_pki" write "$D" --backend-port "$BACKEND_PORT" --policy-port "$POLICY_PORT"
  export RUST_LOG=${RUST_LOG:-warn}
  backend_args
  "${pin[@]}" "$BIN/metrics_server" "${BACKEND_ARGS[@]}" 2>"$WORK/backend.log" &
  BACKEND_PID=$!
  PIDS+=($!)
  "${pin[@]}" "$BIN/load_pki" serve-policy "$D" --policy-port "$POLICY_PORT" 2>"$WORK/policy.log" &
  PIDS+=($!)
}

# The backend's flags (metrics_server, crud_server): its serving certificate, and request-header
# authentication of the front proxy. Needs D and BACKEND_PORT.
backend_args() {
  BACKEND_ARGS=(--bind-address=127.0.0.1 --secure-port="$BACKEND_PORT"
    --tls-cert-file="$D/metrics-server.crt" --tls-private-key-file="$D/metrics-server.key"
    --requestheader-client-ca-file="$D/front-proxy-ca.crt"
    --requestheader-allowed-names=front-proxy-client)
}

# The gateway's flags for the comparisons: client certificates required, the front-proxy
# client certificate, the load_pki APIService and endpoints, and the SubjectAccessReview
# webhook (load_pki serve-policy) as its authorizer. Needs D and GATEWAY_PORT.
gateway_args() {
  GATEWAY_ARGS=(--bind-address=127.0.0.1 --secure-port="$GATEWAY_PORT"
    --tls-cert-file="$D/gateway.crt" --tls-private-key-file="$D/gateway.key"
    --client-ca-file="$D/ca.crt" --anonymous-auth=false
    --proxy-client-cert-file="$D/front-proxy-client.crt"
    --proxy-client-key-file="$D/front-proxy-client.key"
    --apiservice-dir="$D/apiservices" --service-endpoints="$D/service-endpoints.yaml"
    --authorization-mode=Webhook --authorization-webhook-config-file="$D/authz-webhook.kubeconfig"
    --authorization-webhook-version=v1)
}
