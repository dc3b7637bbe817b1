#!/usr/bin/env bash
# Whole-path A/B of internal/gopool against plain `go` on the peer bench's
# load (PEER_BENCH: the peer benchmark's directory, as for run.sh): the
# same egressd built twice, with the pool and with the build tag
# egressd_plaingo (every gopool.Go a plain `go f()`), run alternately, one
# harness round each, ROUNDS times (pool, plain, pool, plain, ...). The
# harness's report then gives both names' figures over the rounds: keep the
# pool only if it wins beyond the round-to-round spread (issue 16).
# egressd resolves through a dnsmasq as in bench/peer/run.sh.
# Usage: bench/peer/gopool-ab.sh [ROUNDS=3] [QUICK=1 as for the harness]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
peer=${PEER_BENCH:?set PEER_BENCH to the peer benchmark directory}
work=${BENCH_WORK:-${TMPDIR:-/tmp}/peer-bench}
rounds=${ROUNDS:-3}
command -v dnsmasq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base; }
grep -qE '^127\.0\.0\.1[[:space:]].*\bup\.bench\.test\b' /etc/hosts || echo '127.0.0.1 up.bench.test' >> /etc/hosts
cd "$repo"
CGO_ENABLED=0 go build -trimpath -o bin/egressd-pool ./cmd/egressd
CGO_ENABLED=0 go build -trimpath -tags egressd_plaingo -o bin/egressd-plaingo ./cmd/egressd
dnsmasq -k --port 15399 --listen-address 127.0.0.1 --bind-interfaces --no-resolv --no-dhcp-interface=lo --local-ttl=60 \
  --conf-file=/dev/null >/dev/null 2>&1 &
dns_pid=$!
trap 'kill $dns_pid 2>/dev/null || true' EXIT
combined=$work/out/gopool-ab.jsonl
mkdir -p "$work/out"
: > "$combined"
for r in $(seq "$rounds"); do
  for v in pool plaingo; do
    export EXTRA_PROXY="egressd-$v | env GODEBUG=schedtrace=2147483647 $repo/bin/egressd-$v run --policy $repo/bench/peer/policy.yaml --pods $repo/bench/peer/pods.yaml --upstream-dns 127.0.0.1:15399 --proxy-addr 127.0.0.1:14000 --dns-addr '' --metrics-addr '' --max-conns-per-client 20000 | http://127.0.0.1:14000 | auto"
    ONLY=egressd-$v ROUNDS=1 ROUNDS_QUICK=1 bash "$peer/run.sh" >/dev/null
    sed -E "s/\"round\":[0-9]+/\"round\":$r/" "$work/out/raw.jsonl" >> "$combined"
  done
done
"$work/bin/load" report -in "$combined" -md "$work/out/gopool-ab.md" \
  -header "gopool A/B: egressd-pool (internal/gopool) vs egressd-plaingo (plain go), $rounds alternating rounds, $(nproc) cores"
cat "$work/out/gopool-ab.md"
