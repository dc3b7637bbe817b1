# Sourced by demo.sh and suggest.sh: the demo's ports, a work directory
# removed on exit, and the outside world (examples/demo/origin: DNS for
# *.demo.test and the TLS origin on 127.0.0.1) started in the background.
# Ports: EGRESSD_DEMO_PORT_BASE (default 23100) .. +4.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
base=${EGRESSD_DEMO_PORT_BASE:-23100}
proxy=127.0.0.1:$base dns=127.0.0.1:$((base+1)) metrics=127.0.0.1:$((base+2))
origin_dns=127.0.0.1:$((base+3)) origin_https=127.0.0.1:23443
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

[ -x bin/egressd ] || make build
go build -o "$work/origin" ./examples/demo/origin
"$work/origin" -dir "$work" -dns "$origin_dns" -https "$origin_https" &
pids+=($!)
