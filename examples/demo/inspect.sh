#!/usr/bin/env bash
# The inspection demo (make demo-inspect), offline: rules with inspect: true
# for the model store and the blob hosts allow GET /weights.bin only. The
# download's 302 to the blob host and the blob's 200 are recorded with their
# HTTP evidence (the 302's target in http.redirect_host, never the signed
# URL's query), and a denied path is answered 403 path-not-allowed inside
# the tunnel. Ports as demo.sh.
set -euo pipefail
# shellcheck source=world.sh
source "$(dirname "$0")/world.sh"

# The inspection CA: egressd signs the leaves of inspected tunnels with it,
# and the client trusts it (the origin's CA is egressd's --upstream-ca).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj "/CN=egressd demo inspection CA" -keyout "$work/inspect-ca.key" -out "$work/inspect-ca.pem" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

cat >"$work/inspect-policy.yaml" <<'YAML'
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: demo-inspect, namespace: demo}
spec:
  podSelector:
    matchLabels: {app.kubernetes.io/name: llm-server}
  egress:
    - hosts: ["models.demo.test"]
      ports: [23443]
      cidrs: ["127.0.0.0/8"]
      inspect: true
      http:
        - methods: [GET]
          paths: ["/weights.bin"]
    - hosts: ["**.blob.demo.test"]
      ports: [23443]
      cidrs: ["127.0.0.0/8"]
      inspect: true
      http:
        - methods: [GET]
          paths: ["/weights.bin"]
YAML
for _ in $(seq 100); do [ -s "$work/ca.pem" ] && break; sleep 0.1; done
./bin/egressd check --inspect --policy "$work/inspect-policy.yaml"

./bin/egressd run --policy "$work/inspect-policy.yaml" --pods examples/demo/pods.yaml \
  --inspect-ca-cert "$work/inspect-ca.pem" --inspect-ca-key "$work/inspect-ca.key" --upstream-ca "$work/ca.pem" \
  --upstream-dns "$origin_dns" --proxy-addr "$proxy" --dns-addr "$dns" --metrics-addr "$metrics" \
  --audit-file "$work/audit.jsonl" >/dev/null 2>"$work/egressd.log" &
egressd_pid=$!
pids+=($egressd_pid)
for _ in $(seq 100); do
  if curl -fs "http://$metrics/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fs "http://$metrics/readyz" >/dev/null || { echo "egressd did not become ready:"; cat "$work/egressd.log"; exit 1; }

export HTTPS_PROXY=http://$proxy
echo "== 1. inspected download: GET /weights.bin on models.demo.test, its 302 to the blob host"
curl -fsSL --cacert "$work/inspect-ca.pem" -o "$work/weights.bin" "https://models.demo.test:23443/weights.bin"
echo "downloaded $(stat -c %s "$work/weights.bin") bytes"

echo
echo "== 2. denied path inside the inspected tunnel: GET /leak"
curl -sS --cacert "$work/inspect-ca.pem" -o /dev/null -D "$work/h" -w 'status %{http_code}, ' "https://models.demo.test:23443/leak"
grep -i '^x-egressd-reason' "$work/h"

kill -TERM "$egressd_pid"; wait "$egressd_pid" || true
echo
echo "== the records: each inspected exchange (kind inspected, tunnel = its tunnel's id) and the tunnels"
grep '"kind":"inspected"' "$work/audit.jsonl"
grep '"inspected":true' "$work/audit.jsonl"
if grep -q -e "$(sed -n 2p "$work/inspect-ca.key")" -e DEMO-SECRET "$work/audit.jsonl" "$work/egressd.log"; then
  echo "UNEXPECTED: the CA key or the signed URL's query is in a record or log line"; exit 1
fi
