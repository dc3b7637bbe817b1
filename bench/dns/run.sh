#!/usr/bin/env bash
# DNS benchmark: dnsperf against egressd's resolver (every query
# policy-checked and audit-logged), dnsmasq and CoreDNS, all forwarding to
# the same authoritative upstream, warm cache; then p50/p99 latency and the
# added latency of a cold miss. See README.md. Needs scripts/deps/dns.sh;
# CoreDNS is taken from .tools/coredns when present.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
DURATION=${DURATION:-10}   # seconds of dnsperf per server
NAMES=${NAMES:-1000}       # distinct names in the query set
CLIENTS=${CLIENTS:-4}      # dnsperf -c
OUTSTANDING=${OUTSTANDING:-100}
PROFILE=${PROFILE:-}       # when set, egressd's CPU profile of the whole run goes there
TTL0=${TTL0:-1}            # also measure an upstream answering with TTL 0 (every query a miss)

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

for t in dnsperf dnsmasq; do
	command -v "$t" >/dev/null || { echo "missing $t: run scripts/deps/dns.sh" >&2; exit 1; }
done
go build -o "$work/" ./bench/dns/upstream ./bench/dns/egressd ./bench/dns/probe

UP=127.0.0.1:5390
"$work/upstream" -addr "$UP" & pids+=($!)
prof=()
[[ -n "$PROFILE" ]] && prof=(-cpuprofile "$PROFILE")
"$work/egressd" -addr 127.0.0.1:5391 -upstream "$UP" -audit "$work/audit.jsonl" "${prof[@]}" 2>"$work/egressd.log" & pids+=($!)
dnsmasq -k --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.1 --port=5392 \
	--server=127.0.0.1#5390 --cache-size=10000 --user=root --pid-file= --log-facility=- 2>"$work/dnsmasq.log" & pids+=($!)
servers=("egressd 5391" "dnsmasq 5392")
if [[ -x .tools/coredns ]]; then
	printf '.:5393 {\n  bind 127.0.0.1\n  cache\n  forward . %s\n}\n' "$UP" >"$work/Corefile"
	.tools/coredns -conf "$work/Corefile" -quiet >"$work/coredns.log" 2>&1 & pids+=($!)
	servers+=("coredns 5393")
else
	echo "note: .tools/coredns missing (GOBIN=\$PWD/.tools go install github.com/coredns/coredns@v1.15.0): skipped" >&2
fi

UP0=127.0.0.1:5394
ttl0=()
if [[ "$TTL0" == 1 ]]; then
	"$work/upstream" -addr "$UP0" -ttl 0 & pids+=($!)
	"$work/egressd" -addr 127.0.0.1:5395 -upstream "$UP0" -audit "$work/audit0.jsonl" 2>"$work/egressd0.log" & pids+=($!)
	dnsmasq -k --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.1 --port=5396 \
		--server=127.0.0.1#5394 --cache-size=10000 --user=root --pid-file= --log-facility=- 2>"$work/dnsmasq0.log" & pids+=($!)
	ttl0=("egressd 5395" "dnsmasq 5396")
fi

for i in $(seq 0 $((NAMES - 1))); do echo "n$i.bench.test A"; done >"$work/queries"

# Wait until every server answers (each has its own listener start-up).
for s in "${servers[@]}" "upstream 5390" "${ttl0[@]/#/ttl0-}"; do
	port=${s#* }
	for _ in $(seq 100); do
		dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 n0.bench.test A >/dev/null 2>&1 && break
	done
done

declare -A qps p50 p99
for s in "${servers[@]}"; do
	name=${s% *} port=${s#* }
	# Warm: every name once, then measure.
	dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" -n 1 >/dev/null 2>&1
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" -l "$DURATION" -c "$CLIENTS" -q "$OUTSTANDING" 2>&1)
	qps[$name]=$(awk '/Queries per second/ {print $4}' <<<"$out")
	lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
	read -r p50[$name] p99[$name] < <("$work/probe" -server "127.0.0.1:$port" -n 2000 -names "$NAMES" | sed -E 's/p50_ms=([^ ]+) p99_ms=([^ ]+).*/\1 \2/')
	echo "$name: qps=${qps[$name]} lost=$lost p50=${p50[$name]}ms p99=${p99[$name]}ms"
done

# TTL 0: nothing is cached (RFC 1035 §3.2.1), every query goes upstream.
declare -A qps0
for s in "${ttl0[@]}"; do
	name=${s% *} port=${s#* }
	out=$(dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries" -l "$DURATION" -c "$CLIENTS" -q "$OUTSTANDING" 2>&1)
	qps0[$name]=$(awk '/Queries per second/ {print $4}' <<<"$out")
	lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
	echo "ttl0 $name: qps=${qps0[$name]} lost=$lost"
done

# Cold misses: fresh names through egressd versus the upstream itself.
cold_e=$("$work/probe" -server 127.0.0.1:5391 -n 500 -cold)
cold_u=$("$work/probe" -server "$UP" -n 500 -cold)
echo "cold egressd:  $cold_e"
echo "cold upstream: $cold_u"
ce=$(sed -E 's/p50_ms=([^ ]+).*/\1/' <<<"$cold_e")
cu=$(sed -E 's/p50_ms=([^ ]+).*/\1/' <<<"$cold_u")

echo
echo "| server | qps | vs egressd | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
for s in "${servers[@]}"; do
	name=${s% *}
	ratio=$(awk -v a="${qps[egressd]}" -v b="${qps[$name]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
	echo "| $name | ${qps[$name]} | egressd/$name = $ratio | ${p50[$name]} | ${p99[$name]} |"
done
echo
awk -v e="$ce" -v u="$cu" 'BEGIN { printf "cold miss p50: egressd %.3f ms, upstream alone %.3f ms, added %.3f ms\n", e, u, e - u }'
if [[ "$TTL0" == 1 ]]; then
	awk -v e="${qps0[egressd]}" -v d="${qps0[dnsmasq]}" 'BEGIN { printf "upstream TTL 0: egressd %s qps, dnsmasq %s qps, egressd/dnsmasq = %.2f\n", e, d, e / d }'
fi
echo "audit records written by egressd: $(wc -l <"$work/audit.jsonl")"
