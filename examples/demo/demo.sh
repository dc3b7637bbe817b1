#!/usr/bin/env bash
# The offline demo: egressd between curl and a local "internet" (a DNS server
# and a TLS origin on 127.0.0.1). An allowed download follows a redirect to
# the blob host; a redirect to a host no rule allows is refused; the metadata
# address is refused without a packet sent. Then the audit records.
# Ports: EGRESSD_DEMO_PORT_BASE (default 23100) .. +4.
set -euo pipefail
# shellcheck source=world.sh
source "$(dirname "$0")/world.sh"

./bin/egressd run --policy examples/demo/policy.yaml --pods examples/demo/pods.yaml \
  --upstream-dns "$origin_dns" --proxy-addr "$proxy" --dns-addr "$dns" --metrics-addr "$metrics" \
  --audit-file "$work/audit.jsonl" >/dev/null 2>"$work/egressd.log" &
egressd_pid=$!
pids+=($egressd_pid)
for _ in $(seq 100); do
  if [ -s "$work/ca.pem" ] && curl -fs "http://$metrics/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fs "http://$metrics/readyz" >/dev/null || { echo "egressd did not become ready:"; cat "$work/egressd.log"; exit 1; }
kill -0 "${pids[0]}" 2>/dev/null || { echo "the demo origin did not start (ports $origin_dns, $origin_https busy?)"; exit 1; }

export HTTPS_PROXY=http://$proxy
echo "== 1. allowed: models.demo.test redirects to eu1.blob.demo.test (allowed by **.blob.demo.test)"
curl -fsSL --cacert "$work/ca.pem" -o "$work/weights.bin" "https://models.demo.test:23443/weights.bin"
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

# SIGTERM: egressd drains and flushes its audit records before it exits.
kill -TERM "$egressd_pid"; wait "$egressd_pid" || true
echo
echo "== audit records (one JSON line per request; also on egressd's stdout)"
cat "$work/audit.jsonl"
