#!/usr/bin/env bash
# From audit mode to a working policy, offline: egressd runs in audit mode
# with a policy that selects nobody, curl downloads through the redirect
# (allowed, recorded with would_deny), `egressd suggest` writes the policy
# the records call for, `egressd check` accepts it, and egressd in enforce
# mode with it lets the same download through. `egressd report` prints the
# records and writes the HTML map to out/demo-report.html.
# Ports as world.sh says.
set -euo pipefail
# shellcheck source=world.sh
source "$(dirname "$0")/world.sh"

# A policy of the namespace that selects no pod: in audit mode every
# request of the demo pod is allowed and recorded with would_deny.
cat >"$work/unrelated.yaml" <<'YAML'
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: someone-else, namespace: demo}
spec:
  podSelector: {matchLabels: {app.kubernetes.io/name: someone-else}}
  egress:
    - hosts: ["api.demo.test"]
      ports: [443]
YAML

# start MODE POLICY...: egressd in MODE with these policies (records in
# $work/audit-MODE.jsonl), ready when this returns.
start() {
  local mode=$1; shift
  local args=()
  for p in "$@"; do args+=(--policy "$p"); done
  start_egressd "$mode" --mode "$mode" "${args[@]}"
}

export HTTPS_PROXY=http://$proxy
url="https://models.demo.test:23443/weights.bin"

echo "== 1. audit mode, a policy that selects nobody: the download works, every request would be denied"
start audit "$work/unrelated.yaml"
curl -fsSL --cacert "$work/ca.pem" -o "$work/weights.bin" "$url"
echo "downloaded $(stat -c %s "$work/weights.bin") bytes"
stop_egressd

echo
echo "== 2. egressd suggest: the policy the records call for (loopback is private: --cidr names it)"
"$egressd" suggest --pods examples/demo/pods.yaml --cidr 127.0.0.0/8 "$work/audit-audit.jsonl" | tee "$work/suggested.yaml"

echo
echo "== 3. egressd check accepts it"
"$egressd" check --policy "$work/suggested.yaml" --pods examples/demo/pods.yaml

echo
echo "== 4. enforce mode with the suggested policy: the same download works"
start enforce "$work/unrelated.yaml" "$work/suggested.yaml"
rm -f "$work/weights.bin"
curl -fsSL --cacert "$work/ca.pem" -o "$work/weights.bin" "$url"
echo "downloaded $(stat -c %s "$work/weights.bin") bytes"
if curl -fsSL --cacert "$work/ca.pem" -o /dev/null "https://models.demo.test:23443/leak" 2>/dev/null; then
  echo "UNEXPECTED: the redirect to exfil.demo.test was allowed"; exit 1
fi
echo "the redirect to exfil.demo.test stays denied"
stop_egressd

echo
echo "== 5. egressd report of both runs (HTML map: out/demo-report.html)"
mkdir -p out
"$egressd" report "$work/audit-audit.jsonl" "$work/audit-enforce.jsonl"
"$egressd" report --format html "$work/audit-audit.jsonl" "$work/audit-enforce.jsonl" >out/demo-report.html
