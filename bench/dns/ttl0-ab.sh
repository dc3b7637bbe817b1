#!/usr/bin/env bash
# Before/after A/B of the miss path: bench/dns/egressd built from this
# tree and BEFORE (another build of it), both forwarding to an upstream
# answering with TTL 0, so every query is a miss and goes through the
# resolver's flight map; alternating 10 s dnsperf runs, six rounds.
# Usage: BEFORE=BIN bench/dns/ttl0-ab.sh
set -uo pipefail
: "${BEFORE:?BEFORE: the other build of bench/dns/egressd}"
cd "$(dirname "$0")/../.."
w=$(mktemp -d)
go build -o "$w/" ./bench/dns/upstream ./bench/dns/egressd
"$w/upstream" -addr 127.0.0.1:5394 -ttl 0 & up=$!
GODEBUG=schedtrace=2147483647 "$w/egressd" -addr 127.0.0.1:5395 -upstream 127.0.0.1:5394 -audit "$w/a.jsonl" 2>/dev/null & a=$!
GODEBUG=schedtrace=2147483647 "$BEFORE" -addr 127.0.0.1:5398 -upstream 127.0.0.1:5394 -audit "$w/b.jsonl" 2>/dev/null & b=$!
trap 'kill $up $a $b 2>/dev/null; rm -rf $w' EXIT
sleep 1
for i in $(seq 0 999); do echo "n$i.bench.test A"; done > "$w/q"
declare -A pid=([5395]=$a [5398]=$b) name=([5395]=after [5398]=before)
for r in 1 2 3 4 5 6; do
  ports="5395 5398"; ((r % 2 == 0)) && ports="5398 5395"
  for p in $ports; do
    c0=$(awk '{print $14+$15}' /proc/${pid[$p]}/stat)
    q=$(dnsperf -s 127.0.0.1 -p $p -d "$w/q" -l 10 -c 4 -q 100 2>&1 | awk '/Queries per second/ {print $4}')
    c1=$(awk '{print $14+$15}' /proc/${pid[$p]}/stat)
    awk -v n="${name[$p]}" -v r=$r -v q="$q" -v c=$((c1-c0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "round %d %-6s qps %.0f  CPU/query %.2f µs\n", r, n, q, c/hz*1e6/(q*10) }'
  done
done
