#!/usr/bin/env bash
# Whole-path A/B of internal/gopool against plain `go` on the peer bench's
# load: the same egressd built twice, with the pool and with the build tag
# egressd_plaingo (every gopool.Go a plain `go f()`), run alternately by
# bench/peer/ab.sh (one harness round each, ROUNDS times, no peers). Keep
# the pool only if it wins beyond the round-to-round spread (issue 16).
# Since the proxy runs plain goroutines, the tag changes only the resolver's
# and the DNS server's pools.
# Usage: PEER_BENCH=DIR bench/peer/gopool-ab.sh [ROUNDS=3] [QUICK=1 as for the harness]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
CGO_ENABLED=0 go build -trimpath -o bin/egressd-pool ./cmd/egressd
CGO_ENABLED=0 go build -trimpath -tags egressd_plaingo -o bin/egressd-plaingo ./cmd/egressd
PEERS=none AB_HEADER="gopool A/B: egressd-pool (internal/gopool) vs egressd-plaingo (plain go)" \
  exec bash bench/peer/ab.sh egressd-pool "$repo/bin/egressd-pool" egressd-plaingo "$repo/bin/egressd-plaingo"
