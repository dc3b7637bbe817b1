# Sourced by demo.sh and suggest.sh: the demo's ports, a work directory
# removed on exit, the outside world (examples/demo/origin: DNS for
# *.demo.test and the TLS origin on 127.0.0.1, the CAs in the work
# directory) started in the background, and start_egressd/stop_egressd.
# Ports: EGRESSD_DEMO_PORT_BASE (default 23100) .. +3, and 23443 (the
# origin: the policies name that port). EGRESSD: the egressd binary
# (default bin/egressd, built if missing).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
base=${EGRESSD_DEMO_PORT_BASE:-23100}
proxy=127.0.0.1:$base dns=127.0.0.1:$((base+1)) metrics=127.0.0.1:$((base+2))
origin_dns=127.0.0.1:$((base+3)) origin_https=127.0.0.1:23443
egressd=${EGRESSD:-./bin/egressd}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

[ -n "${EGRESSD:-}" ] || [ -x bin/egressd ] || make build
go build -o "$work/origin" ./examples/demo/origin
"$work/origin" -dir "$work" -dns "$origin_dns" -https "$origin_https" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/ca.pem" ] && break; sleep 0.1; done
[ -s "$work/ca.pem" ] || { echo "the demo origin did not start (ports $origin_dns, $origin_https busy?)"; exit 1; }

# start_egressd NAME ARGS...: `egressd run ARGS` in the background with the
# demo's pods, listeners and resolver; its records go to
# $work/audit-NAME.jsonl, its log to $work/egressd-NAME.log. Ready when
# this returns.
start_egressd() {
  local name=$1; shift
  "$egressd" run "$@" --pods examples/demo/pods.yaml \
    --upstream-dns "$origin_dns" --proxy-addr "$proxy" --dns-addr "$dns" --metrics-addr "$metrics" \
    --audit-file "$work/audit-$name.jsonl" ${audit_key:+--audit-signing-key "$audit_key"} >/dev/null 2>"$work/egressd-$name.log" &
  egressd_pid=$!
  pids+=($egressd_pid)
  for _ in $(seq 100); do
    if curl -fs "http://$metrics/readyz" >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "egressd did not become ready:"; cat "$work/egressd-$name.log"; exit 1
}
# stop_egressd: SIGTERM, so that egressd drains and flushes its audit
# records before it exits.
stop_egressd() { kill -TERM "$egressd_pid"; wait "$egressd_pid" || true; }
