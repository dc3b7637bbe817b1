#!/usr/bin/env bash
# egressd side by side with squid and smokescreen on the shared peer
# benchmark (PEER_BENCH: its directory, required).
# egressd resolves through DNS, not /etc/hosts: a dnsmasq on 127.0.0.1:15399
# serves the harness's /etc/hosts entry (up.bench.test) as the upstream,
# with a 60 s TTL as a real answer would have (squid and smokescreen read
# /etc/hosts and do no DNS at all).
# Usage: PEER_BENCH=DIR bench/peer/run.sh [QUICK=1 ONLY=... as for the harness]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
peer=${PEER_BENCH:?set PEER_BENCH to the peer benchmark directory}
command -v dnsmasq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base; }
grep -qE '^127\.0\.0\.1[[:space:]].*\bup\.bench\.test\b' /etc/hosts || echo '127.0.0.1 up.bench.test' >> /etc/hosts
(cd "$repo" && make -s build)
dnsmasq -k --port 15399 --listen-address 127.0.0.1 --bind-interfaces --no-resolv --no-dhcp-interface=lo --local-ttl=60 \
  --conf-file=/dev/null >/dev/null 2>&1 &
dns_pid=$!
trap 'kill $dns_pid 2>/dev/null || true' EXIT
# egressd runs with the image's GODEBUG (Dockerfile; TestImageGODEBUG).
export EXTRA_PROXY="egressd | env GODEBUG=schedtrace=2147483647 $repo/bin/egressd run --policy $repo/bench/peer/policy.yaml --pods $repo/bench/peer/pods.yaml --upstream-dns 127.0.0.1:15399 --proxy-addr 127.0.0.1:14000 --dns-addr '' --metrics-addr '' --max-conns-per-client 20000 | http://127.0.0.1:14000 | auto"
export ONLY=${ONLY:-direct,squid,smokescreen,egressd}
bash "$peer/run.sh"
