#!/usr/bin/env bash
# Certificates for examples/deploy/: the gateway's serving certificate and its proxy
# client certificate (the front-proxy identity extension servers authenticate), as
# Secrets in the kube-aggregator namespace, and the proxy client CA beside the cluster's
# own front-proxy CA in kube-system, for metrics-server to trust both.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=kube-aggregator-ca \
  -keyout ca.key -out ca.crt 2>/dev/null

# Serving: the name clients use, kube-aggregator.kube-aggregator.svc.
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-aggregator \
  -keyout serving.key -out serving.csr 2>/dev/null
printf 'subjectAltName=DNS:kube-aggregator.kube-aggregator.svc,DNS:kube-aggregator.kube-aggregator.svc.cluster.local,DNS:localhost\nextendedKeyUsage=serverAuth\n' > serving.ext
openssl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
  -extfile serving.ext -out serving.crt 2>/dev/null

# Proxy client: CN kube-aggregator, client authentication only.
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-aggregator \
  -keyout proxy.key -out proxy.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > proxy.ext
openssl x509 -req -in proxy.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
  -extfile proxy.ext -out proxy.crt 2>/dev/null

kubectl apply -f "$(dirname "$0")/namespace.yaml" 2>/dev/null || true
kubectl -n kube-aggregator create secret tls kube-aggregator-serving \
  --cert=serving.crt --key=serving.key --dry-run=client -o yaml | kubectl apply -f -
kubectl -n kube-aggregator create secret tls kube-aggregator-proxy-client \
  --cert=proxy.crt --key=proxy.key --dry-run=client -o yaml | kubectl apply -f -

# The cluster's front-proxy CA and ours, for the extension servers' requestheader flags.
kubectl -n kube-system get configmap extension-apiserver-authentication \
  -o jsonpath='{.data.requestheader-client-ca-file}' > front-proxy-ca.crt
cat ca.crt >> front-proxy-ca.crt
kubectl -n kube-system create configmap kube-aggregator-front-proxy-ca \
  --from-file=ca.crt=front-proxy-ca.crt --dry-run=client -o yaml | kubectl apply -f -
cp ca.crt "${OLDPWD}/kube-aggregator-ca.crt"
echo "CA written to ${OLDPWD}/kube-aggregator-ca.crt"
