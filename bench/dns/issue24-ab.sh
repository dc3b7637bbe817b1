#!/bin/sh
# Interleaved A/B of the DNS handler (issue 24): 8c84f75 (before) against
# this checkout (after), six rounds, the two binaries in turn.
# Build first, from the repository root:
#   mkdir -p /tmp/before-refactor && git archive 8c84f75 | tar -x -C /tmp/before-refactor
#   (cd /tmp/before-refactor && go test -c -o /tmp/dns-before.test ./dnsserver)
#   go test -c -o /tmp/dns-after.test ./dnsserver
set -e
BEFORE=${BEFORE:-/tmp/before-refactor}
AFTER=${AFTER:-$(pwd)}
for i in 1 2 3 4 5 6; do
  for v in before after; do
    if [ $v = before ]; then d=$BEFORE/dnsserver; else d=$AFTER/dnsserver; fi
    (cd "$d" && /tmp/dns-$v.test -test.run '^$' -test.bench 'BenchmarkHandle(Cached|Denied)$' -test.benchmem -test.benchtime 1s -test.count 1) | sed -n "s/^Benchmark/$v round$i Benchmark/p"
  done
done
