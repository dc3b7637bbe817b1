#!/usr/bin/env bash
# The offline demo (make demo): egressd between curl and a local "internet"
# (a DNS server and a TLS origin on 127.0.0.1, examples/demo/origin).
# Part 1, blind tunnels: an allowed download follows a redirect to the blob
# host; a redirect to a host no rule allows is refused; the metadata address
# is refused without a packet sent; then the audit records.
# Part 2, TLS inspection (docs/inspection.md): the model store's tunnel is
# inspected, its 302 to the blob host recorded with http.redirect_host and a
# denied path answered 403 inside the tunnel; `egressd suggest` names the
# blob host from that recorded redirect; with the blob host's rule the
# download's 302 and the blob's 200 are both recorded.
# Every record is signed with the demo's key (egressd keygen), and the demo
# ends by verifying its own records (egressd verify, docs/reports.md).
# Ports as world.sh says.
set -euo pipefail
# shellcheck source=world.sh
source "$(dirname "$0")/world.sh"

"$egressd" keygen --name egressd-demo --out "$work" >/dev/null
audit_key=$work/egressd-demo.key

start_egressd blind --policy examples/demo/policy.yaml
export HTTPS_PROXY=http://$proxy
url="https://models.demo.test:23443/weights.bin"

echo "== 1. allowed: models.demo.test redirects to eu1.blob.demo.test (allowed by **.blob.demo.test)"
curl -fsSL --cacert "$work/ca.pem" -o "$work/weights.bin" "$url"
echo "downloaded $(stat -c %s "$work/weights.bin") bytes"

echo
echo "== 2. denied: /leak redirects to exfil.demo.test, which no rule allows"
if curl -sSL --cacert "$work/ca.pem" -o /dev/null "https://models.demo.test:23443/leak" 2>"$work/curl.err"; then
  echo "UNEXPECTED: the download succeeded"; exit 1
fi
cat "$work/curl.err"
curl -s -o /dev/null -w 'the proxy answered CONNECT with %{http_connect}, ' -D "$work/h" "https://exfil.demo.test:23443/upload" --cacert "$work/ca.pem" || true
grep -i '^x-egressd-reason' "$work/h" || true

echo
echo "== 3. denied: the cloud metadata address (classified, never dialled)"
curl -s -x "http://$proxy" -D "$work/h2" "http://169.254.169.254/latest/meta-data/" || true
grep -i '^x-egressd-reason' "$work/h2" || true

stop_egressd
echo
echo "== audit records (one JSON line per request; also on egressd's stdout)"
cat "$work/audit-blind.jsonl"

# exchanges FILE: one line per inspected exchange of FILE (kind inspected):
# host, method, status, reason and, for a 3xx, the redirect target's host.
exchanges() {
  grep '"kind":"inspected"' "$1" | sed -E \
    -e 's/.*"host":"([^"]*)".*"reason":"([^"]*)".*"http":\{"method":"([^"]*)","status":([0-9]+)(,"redirect_host":"([^"]*)")?.*/  \1  \3 \4  \2  redirect_host=\6/' \
    -e 's/  redirect_host=$//'
}

echo
echo "== TLS inspection: egressd's CA signs a leaf for models.demo.test; curl trusts that CA"
ica=(--inspect-ca-cert "$work/inspect-ca.pem" --inspect-ca-key "$work/inspect-ca.key" --upstream-ca "$work/ca.pem")
start_egressd models --policy examples/demo/inspect-models.yaml "${ica[@]}"

echo "== 4. inspected: GET /weights.bin is allowed; its 302 names eu1.blob.demo.test, which no rule allows yet"
if curl -sSL --cacert "$work/inspect-ca.pem" -o /dev/null "$url" 2>"$work/curl.err"; then
  echo "UNEXPECTED: the download succeeded without a rule for the blob host"; exit 1
fi
cat "$work/curl.err"

echo
echo "== 5. denied path inside the inspected tunnel: GET /leak (the origin never sees it)"
curl -sS --cacert "$work/inspect-ca.pem" -o /dev/null -D "$work/h3" -w 'status %{http_code}, ' "https://models.demo.test:23443/leak"
grep -i '^x-egressd-reason' "$work/h3"
stop_egressd

echo
echo "== the inspected exchanges (records of kind inspected; the signed URL's query is in none)"
exchanges "$work/audit-models.jsonl"

echo
echo "== 6. egressd suggest: enforce mode denied the blob host, so it is listed and never suggested"
"$egressd" suggest --pods examples/demo/pods.yaml --cidr 127.0.0.0/8 "$work/audit-models.jsonl" 2>&1 | grep '^# ' || true
echo "== the same download in audit mode: the blob host is would-deny; suggest takes it from the recorded redirect (exact, no question mark)"
start_egressd models-audit --mode audit --policy examples/demo/inspect-models.yaml "${ica[@]}"
cat "$work/inspect-ca.pem" "$work/ca.pem" >"$work/both-ca.pem" # the blob host is not inspected: its own CA
curl -fsSL --cacert "$work/both-ca.pem" -o /dev/null "$url"
stop_egressd
"$egressd" suggest --pods examples/demo/pods.yaml --cidr 127.0.0.0/8 "$work/audit-models-audit.jsonl" | grep -v '^#'

echo
echo "== 7. with the blob host's rule (examples/demo/inspect-blob.yaml, inspected too): the download"
start_egressd blob --policy examples/demo/inspect-models.yaml --policy examples/demo/inspect-blob.yaml "${ica[@]}"
curl -fsSL --cacert "$work/inspect-ca.pem" -o "$work/weights.bin" "$url"
echo "downloaded $(stat -c %s "$work/weights.bin") bytes"
stop_egressd
echo
echo "== the inspected exchanges: the 302 and the blob's 200"
exchanges "$work/audit-blob.jsonl"
echo "== and the inspected tunnel of the blob host (tls.inspected, the origin's certificate, its requests)"
grep '"kind":"connect"' "$work/audit-blob.jsonl" | grep '"inspected":true' | grep '"host":"eu1.blob.demo.test"'

signer=$(sed 's/.*+//' "$audit_key")
if grep -q -e "$(sed -n 2p "$work/inspect-ca.key")" -e DEMO-SECRET -e "$signer" "$work"/audit-*.jsonl "$work"/egressd-*.log; then
  echo "UNEXPECTED: the CA key, the audit signer key or the signed URL's query is in a record or log line"; exit 1
fi

echo
echo "== 8. credentials: an LLM API call from a pod that holds no key (egressd adds it: examples/demo/inspect-llm.yaml)"
start_egressd llm --policy examples/demo/inspect-llm.yaml "${ica[@]}" --credentials-dir "$work/credentials"
curl -sS --cacert "$work/inspect-ca.pem" -w 'status %{http_code}\n' -X POST -d '{"messages":[]}' "https://api.demo.test:23443/v1/chat/completions"
stop_egressd
echo "== its record names the credential (http.credential), never the value"
grep '"kind":"inspected"' "$work/audit-llm.jsonl" | grep -o '"host":"api.demo.test".*"reason":"[^"]*"\|"http":{[^}]*}'
key=$(cat "$work/credentials/openai")
if grep -q -F -e "$key" -e "$(printf %s "$key" | base64 -w0)" "$work"/audit-*.jsonl "$work"/egressd-*.log; then
  echo "UNEXPECTED: the API key is in a record or log line"; exit 1
fi

echo
echo "== 9. egressd verify: the demo's records, five runs, complete and unaltered (the demo's verifier key)"
"$egressd" verify --key "$work/egressd-demo.pub" "$work"/audit-*.jsonl
