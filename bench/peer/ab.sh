#!/usr/bin/env bash
# Whole-path A/B of two (or more) egressd variants on the peer bench's load,
# beside squid (and smokescreen with PEERS=squid,smokescreen): one harness
# round each, alternating (A, B, peers, A, B, peers, ...), ROUNDS times, so
# that every variant meets the same machine. A variant is a binary and its
# flags: the same binary twice with other flags is an A/B of a feature. The harness's report gives every
# name's figures over the rounds. egressd resolves through a dnsmasq as in
# bench/peer/run.sh, with the image's GODEBUG.
# Usage: PEER_BENCH=DIR [ARGS_A=...] [ARGS_B=...] bench/peer/ab.sh NAME_A BIN_A NAME_B BIN_B [NAME_C BIN_C [NAME_D BIN_D]]
# (ROUNDS=3, PEERS=squid or none; ARGS_A..ARGS_D: more `egressd run` flags for one
# variant, e.g. --lameduck 0 for a build that has the flag; BENCH_ARGS goes to
# the harness's load client, e.g. "-tests check,nc,ka -settle 5s")
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
peer=${PEER_BENCH:?set PEER_BENCH to the peer benchmark directory}
work=${BENCH_WORK:-${TMPDIR:-/tmp}/peer-bench}
rounds=${ROUNDS:-3}
peers=${PEERS:-squid}
(($# >= 4 && $# <= 8 && $# % 2 == 0)) || { echo "usage: $0 NAME_A BIN_A NAME_B BIN_B [NAME_C BIN_C [NAME_D BIN_D]]" >&2; exit 2; }
variants=("$1=$2=${ARGS_A:-}" "$3=$4=${ARGS_B:-}")
(($# >= 6)) && variants+=("$5=$6=${ARGS_C:-}")
(($# >= 8)) && variants+=("$7=$8=${ARGS_D:-}")
command -v dnsmasq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base; }
grep -qE '^127\.0\.0\.1[[:space:]].*\bup\.bench\.test\b' /etc/hosts || echo '127.0.0.1 up.bench.test' >> /etc/hosts
dnsmasq -k --port 15399 --listen-address 127.0.0.1 --bind-interfaces --no-resolv --no-dhcp-interface=lo --local-ttl=60 \
  --conf-file=/dev/null >/dev/null 2>&1 &
dns_pid=$!
trap 'kill $dns_pid 2>/dev/null || true' EXIT
combined=$work/out/ab.jsonl
mkdir -p "$work/out"
: > "$combined"
for r in $(seq "$rounds"); do
  # Each round starts one variant later than the one before.
  k=$(((r - 1) % ${#variants[@]}))
  for v in "${variants[@]:k}" "${variants[@]:0:k}" "peers=="; do
    IFS== read -r name bin args <<<"$v"
    if [[ $name == peers && $peers == none ]]; then
      continue
    elif [[ $name == peers ]]; then
      unset EXTRA_PROXY
      ONLY=$peers ROUNDS=1 bash "$peer/run.sh" >/dev/null
    else
      export EXTRA_PROXY="$name | env GODEBUG=schedtrace=2147483647 $bin run --policy $repo/bench/peer/policy.yaml --pods $repo/bench/peer/pods.yaml --upstream-dns 127.0.0.1:15399 --proxy-addr 127.0.0.1:14000 --dns-addr '' --metrics-addr '' --max-conns-per-client 20000 $args | http://127.0.0.1:14000 | auto"
      ONLY=$name ROUNDS=1 bash "$peer/run.sh" >/dev/null
    fi
    sed -E "s/\"round\":[0-9]+/\"round\":$r/" "$work/out/raw.jsonl" >> "$combined"
  done
done
"$work/bin/load" report -in "$combined" -md "$work/out/ab.md" \
  -header "${AB_HEADER:-A/B: ${variants[*]%%=*} beside $peers}, $rounds alternating rounds, $(nproc) cores"
cat "$work/out/ab.md"
