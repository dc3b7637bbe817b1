#!/usr/bin/env bash
# Proxy load harness: proxied vs direct on loopback, one run. Called by
# `make bench`. Figures go to stdout and, as JSON, to $OUT (default
# bench/proxy/out/load.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-bench/proxy/out/load.json}"
mkdir -p "$(dirname "$out")"
bin="$(mktemp -d)/load"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./bench/proxy/load
"$bin" -bulk-bytes "${BULK_BYTES:-2147483648}" -conn-duration "${CONN_DURATION:-5s}" \
  -workers "${WORKERS:-16}" -idle-tunnels "${IDLE_TUNNELS:-5000}" -json "$out" "$@"
echo "figures: $out"
