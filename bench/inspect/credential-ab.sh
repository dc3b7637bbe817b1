#!/usr/bin/env bash
# Issue 28's A/B: inspected keep-alive requests without and with a
# credential set on every request (inspect.BenchmarkInspectedCredential: a
# Go client, the engine and a TLS origin in one process on loopback),
# HTTP/1.1 and HTTP/2, interleaved: odd rounds run without then with, even
# rounds with then without (no side always second), one fresh process
# each, from one test binary. cpu-ns/op is the process's CPU
# (client, engine and origin) per request; allocs/op the process's.
# Usage: [ROUNDS=5] [BENCHTIME=2000x] bench/inspect/credential-ab.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
BENCHTIME=${BENCHTIME:-2000x}
bin=$(mktemp -d)/inspect.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./inspect/
for r in $(seq "$ROUNDS"); do
  for proto in h1 h2; do
    modes="without with"
    (( r % 2 == 0 )) && modes="with without"
    for mode in $modes; do
      (cd inspect && "$bin" -test.run '^$' -test.bench "BenchmarkInspectedCredential/$proto/$mode\$" \
        -test.benchtime "$BENCHTIME" -test.benchmem) | grep '^Benchmark' | sed "s/^/round $r /"
    done
  done
done
