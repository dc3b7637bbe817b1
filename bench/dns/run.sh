#!/usr/bin/env bash
# DNS benchmark: dnsperf against egressd's DNS server (every query
# rate-checked, identified, policy-checked and audit-logged), dnsmasq and
# CoreDNS, all forwarding to the same authoritative upstream, warm cache, in
# ROUNDS alternating rounds; then p50/p99 latency of egressd and dnsmasq
# asked alternately, query by query; the added latency of a cold miss over
# the upstream's own (also alternately); and the rate with an upstream that
# answers with TTL 0 (nothing cached). See README.md. Needs
# scripts/deps/dns.sh; CoreDNS is taken from .tools/coredns when present.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
DURATION=${DURATION:-10}   # seconds of dnsperf per server and round
ROUNDS=${ROUNDS:-3}        # rounds of dnsperf, servers in alternating order
NAMES=${NAMES:-1000}       # distinct names in the query set
CLIENTS=${CLIENTS:-4}      # dnsperf -c
OUTSTANDING=${OUTSTANDING:-100}
PROFILE=${PROFILE:-}       # when set, egressd's CPU profile of the whole run goes there
TTL0=${TTL0:-1}            # also measure an upstream answering with TTL 0 (every query a miss)
SIGNED=${SIGNED:-0}        # also run egressd with a signing key (issue 26's A/B: every record a leaf)
EXTRA_EGRESSD=${EXTRA_EGRESSD:-} # "NAME BIN [ARGS]": another build of bench/dns/egressd beside this one (a before/after A/B)
PAIRED=${PAIRED:-0}        # with SIGNED=1: also ROUNDS rounds of egressd and egressd-signed at once, a dnsperf each

work=$(mktemp -d)
pids=()
declare -A pid_of=() # port → the server's PID, for its CPU per query
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

dnsmasq_on() { # port upstream-port
	dnsmasq -k --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.1 --port="$1" \
		--server="127.0.0.1#$2" --cache-size=10000 --user=root --pid-file= --log-facility=- 2>"$work/dnsmasq$1.log" &
	pids+=($!)
	pid_of[$1]=$!
}

UP=127.0.0.1:5390
"$work/upstream" -addr "$UP" & pids+=($!)
prof=()
[[ -n "$PROFILE" ]] && prof=(-cpuprofile "$PROFILE")
# egressd runs with the image's GODEBUG (Dockerfile; TestImageGODEBUG).
godebug=schedtrace=2147483647
GODEBUG=$godebug "$work/egressd" -addr 127.0.0.1:5391 -upstream "$UP" -audit "$work/audit.jsonl" "${prof[@]}" 2>"$work/egressd.log" & pids+=($!)
pid_of[5391]=$!
dnsmasq_on 5392 5390
servers=("egressd 5391" "dnsmasq 5392")
if [[ "$SIGNED" == 1 ]]; then
	mkdir -p "$work/keys" && go run ./cmd/egressd keygen --name bench --out "$work/keys" >/dev/null
	GODEBUG=$godebug "$work/egressd" -addr 127.0.0.1:5397 -upstream "$UP" -audit "$work/audit-signed.jsonl" \
		-signing-key "$work/keys/bench.key" 2>"$work/egressd-signed.log" & pids+=($!)
	pid_of[5397]=$!
	servers+=("egressd-signed 5397")
fi
if [[ -n "$EXTRA_EGRESSD" ]]; then
	read -r xname xbin xargs <<<"$EXTRA_EGRESSD"
	xargs=${xargs//@KEY@/$work/keys/bench.key} # the key SIGNED=1 made
	# shellcheck disable=SC2086 # ARGS are words
	GODEBUG=$godebug "$xbin" -addr 127.0.0.1:5398 -upstream "$UP" -audit "$work/audit-$xname.jsonl" $xargs 2>"$work/$xname.log" & pids+=($!)
	pid_of[5398]=$!
	servers+=("$xname 5398")
fi
if [[ -x .tools/coredns ]]; then
	printf '.:5393 {\n  bind 127.0.0.1\n  cache\n  forward . %s\n}\n' "$UP" >"$work/Corefile"
	.tools/coredns -conf "$work/Corefile" -quiet >"$work/coredns.log" 2>&1 & pids+=($!)
	pid_of[5393]=$!
	servers+=("coredns 5393")
else
	echo "note: .tools/coredns missing (GOBIN=\$PWD/.tools go install github.com/coredns/coredns@v1.15.0): skipped" >&2
fi
ttl0=()
if [[ "$TTL0" == 1 ]]; then
	"$work/upstream" -addr 127.0.0.1:5394 -ttl 0 & pids+=($!)
	GODEBUG=$godebug "$work/egressd" -addr 127.0.0.1:5395 -upstream 127.0.0.1:5394 -audit "$work/audit0.jsonl" 2>"$work/egressd0.log" & pids+=($!)
	pid_of[5395]=$!
	dnsmasq_on 5396 5394
	ttl0=("egressd 5395" "dnsmasq 5396")
fi

for i in $(seq 0 $((NAMES - 1))); do echo "n$i.bench.test A"; done >"$work/queries"

# Wait until every server answers (each has its own listener start-up).
for s in "${servers[@]}" "upstream 5390" "${ttl0[@]}"; do
	port=${s#* }
	for _ in $(seq 100); do
		dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 n0.bench.test A >/dev/null 2>&1 && break
	done
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime+stime, USER_HZ

# qps_of port: queries per second of one dnsperf run, the server's CPU per
# answered query in µs and dnsperf's own ("QPS CPU DNSPERF_CPU"). On a
# 2-core machine dnsperf (one thread) and the server share the cores: a
# server that needs less than the rest of the machine runs into dnsperf's
# own rate, so qps compares servers only up to that ceiling, and CPU per
# query is the steadier figure.
qps_of() { # qps_of PORT [TAG]: TAG names dnsperf's output file (two at once)
	local pid=${pid_of[$1]} c0 c1 t out=$work/dnsperf${2:-}.out
	c0=$(cpu_ticks "$pid")
	t=$( { TIMEFORMAT='%3U %3S'; time dnsperf -s 127.0.0.1 -p "$1" -d "$work/queries" -l "$DURATION" \
		-c "$CLIENTS" -q "$OUTSTANDING" >"$out" 2>&1; } 2>&1)
	c1=$(cpu_ticks "$pid")
	awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v d="$DURATION" -v t="$t" '
		/Queries lost/ { lost = $3 } /Queries per second/ { qps = $4 }
		END { split(t, u, " "); n = qps * d
		      cpu = n > 0 ? c / hz * 1e6 / n : 0; own = n > 0 ? (u[1] + u[2]) * 1e6 / n : 0
		      if (lost + 0 > 0) printf "%s(lost %s) %.2f %.2f\n", qps, lost, cpu, own; else printf "%s %.2f %.2f\n", qps, cpu, own }' "$out"
}

# Warm: every name once through each server.
for s in "${servers[@]}"; do
	dnsperf -s 127.0.0.1 -p "${s#* }" -d "$work/queries" -n 1 >/dev/null 2>&1
done

echo "warm cache, queries per second (dnsperf -c $CLIENTS -q $OUTSTANDING, ${DURATION}s per server and round):"
minratio=
for r in $(seq "$ROUNDS"); do
	# Each round starts one server later than the round before: no server
	# is always first, or always right after another.
	k=$(((r - 1) % ${#servers[@]}))
	order=("${servers[@]:k}" "${servers[@]:0:k}")
	declare -A qps=() cpu=() own=()
	line="round $r:"
	for s in "${order[@]}"; do
		read -r q c o < <(qps_of "${s#* }")
		qps[${s% *}]=$q cpu[${s% *}]=$c own[${s% *}]=$o
	done
	for s in "${servers[@]}"; do
		line+=" ${s% *} ${qps[${s% *}]} (${cpu[${s% *}]} µs CPU/query, dnsperf ${own[${s% *}]})"
	done
	ratio=$(awk -v a="${qps[egressd]%%(*}" -v b="${qps[dnsmasq]%%(*}" 'BEGIN { printf "%.2f", a / b }')
	if [[ "$SIGNED" == 1 ]]; then
		line+="  egressd-signed/egressd $(awk -v a="${qps[egressd-signed]%%(*}" -v b="${qps[egressd]%%(*}" 'BEGIN { printf "%.3f", a / b }')"
	fi
	if [[ -n "$EXTRA_EGRESSD" ]]; then
		line+="  egressd/$xname $(awk -v a="${qps[egressd]%%(*}" -v b="${qps[$xname]%%(*}" 'BEGIN { printf "%.3f", a / b }')"
	fi
	echo "$line  egressd/dnsmasq $ratio"
	minratio=$(awk -v m="$minratio" -v r="$ratio" 'BEGIN { if (m == "" || r < m) print r; else print m }')
done
echo "lowest egressd/dnsmasq of $ROUNDS rounds: $minratio"

if [[ "$PAIRED" == 1 && "$SIGNED" == 1 ]]; then
	# Both servers at the same time, each with its own dnsperf: whatever the
	# machine does during a round (this VM moves ±10-25% between rounds),
	# it does to both, so the ratio within a round is the steadier figure.
	echo
	echo "paired: egressd and egressd-signed at once, a dnsperf each (${DURATION}s per round):"
	ratios=()
	for r in $(seq "$ROUNDS"); do
		qps_of 5391 a >"$work/paired-a" &
		pa=$!
		qps_of 5397 b >"$work/paired-b" &
		pb=$!
		wait "$pa" "$pb"
		read -r qa ca _ <"$work/paired-a"
		read -r qb cb _ <"$work/paired-b"
		ratio=$(awk -v a="${qa%%(*}" -v b="${qb%%(*}" 'BEGIN { printf "%.3f", b / a }')
		ratios+=("$ratio")
		echo "round $r: egressd $qa ($ca µs CPU/query) egressd-signed $qb ($cb µs CPU/query)  egressd-signed/egressd $ratio"
	done
	printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "median egressd-signed/egressd of %d paired rounds: %.3f\n", NR, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
fi

echo
echo "latency, one query at a time, egressd and dnsmasq alternately (warm):"
"$work/probe" -server 127.0.0.1:5391 -vs 127.0.0.1:5392 -n 4000 -names "$NAMES" |
	sed -e 's/^127.0.0.1:5391/egressd/' -e 's/^127.0.0.1:5392/dnsmasq/'

echo
echo "cold miss, fresh names through egressd and to the upstream alone, alternately:"
"$work/probe" -server 127.0.0.1:5391 -vs "$UP" -n 1000 -cold |
	sed -e 's/^127.0.0.1:5391/egressd/' -e "s/^$UP/upstream/" -e 's/^added_p50_ms/egressd added, median of pairs, ms:/'

if [[ "$TTL0" == 1 ]]; then
	echo
	echo "upstream answering with TTL 0 (every query a miss), queries per second:"
	declare -A q0=() c0=()
	for s in "${ttl0[@]}"; do read -r q c _ < <(qps_of "${s#* }"); q0[${s% *}]=$q c0[${s% *}]=$c; done
	awk -v e="${q0[egressd]%%(*}" -v d="${q0[dnsmasq]%%(*}" -v ce="${c0[egressd]}" -v cd="${c0[dnsmasq]}" \
		'BEGIN { printf "egressd %s (%s µs CPU/query), dnsmasq %s (%s µs CPU/query), egressd/dnsmasq %.2f\n", e, ce, d, cd, e / d }'
fi
echo
echo "audit records written by egressd: $(wc -l <"$work/audit.jsonl")"
