#!/usr/bin/env bash
# Inspected tunnels: egressd (`inspect: true`) against squid-openssl doing
# ssl-bump `bump` for the same host and against a goproxy-based MITM proxy
# (bench/inspect/goproxy, its own module), on the peer bench's origin and
# load client (PEER_BENCH: its directory, required). All proxies mint
# leaves from one CA made here; the load client trusts only that CA, the
# proxies trust the origin's CA upstream. Rounds alternate the PEERS
# (squid, egressd, goproxy, squid, ...) with a fresh proxy process each;
# the harness's `load report` prints medians and per-round values. egressd
# resolves through a dnsmasq as in bench/peer/run.sh (squid and goproxy
# read /etc/hosts), with the image's GODEBUG. Then, each round, the
# H2_PEERS run bench/inspect/h2load (HTTP/1.1 and HTTP/2 inside the
# tunnel, same client, same h2-capable origin on :18445), a fresh process
# per peer and round; H2_PEERS= skips it. Each round starts one peer later
# than the round before. PAIRED="A B" (two egressd peers) then runs A and B
# at the same time, each with its own load client on the same origin,
# ROUNDS times: the A/B for a difference smaller than what this machine
# moves between rounds (issue 28's credential; bench/inspect/credential.md).
# Usage: PEER_BENCH=DIR [ROUNDS=3] [QUICK=1] [PEERS="squid egressd goproxy"] [H2_PEERS="egressd goproxy"]
#        [PAIRED="egressd egressd-cred"] [BENCH_ARGS=...] [H2_ARGS=...] [BENCH_WORK=DIR] bench/inspect/run.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
peer=${PEER_BENCH:?bench/inspect: set PEER_BENCH to the peer bench directory (its upstream/ and load/)}
W=${BENCH_WORK:-${TMPDIR:-/tmp}/peer-bench}
OUT=$W/inspect
LOGS=$OUT/logs
ROUNDS=${ROUNDS:-3}
BENCH_ARGS=${BENCH_ARGS:-}
H2_ARGS=${H2_ARGS:-}
PEERS=${PEERS-squid egressd goproxy}
H2_PEERS=${H2_PEERS-egressd goproxy}
PAIRED=${PAIRED:-}
if [[ -n ${QUICK:-} ]]; then
  ROUNDS=1
  BENCH_ARGS="-thr-bytes 268435456 -thr-runs 1 -dur 2s -max 4000 -idle 500 $BENCH_ARGS"
  H2_ARGS="-thr-bytes 268435456 -thr-runs 1 -dur 2s -max 4000 $H2_ARGS"
fi
for p in $PEERS $H2_PEERS $PAIRED; do
  case $p in squid|egressd|egressd-b|egressd-cred|goproxy) ;; *) echo "bench/inspect: unknown peer $p (squid, egressd, egressd-b, egressd-cred, goproxy)" >&2; exit 2 ;; esac
done
read -ra pair <<<"$PAIRED"
if [[ -n $PAIRED ]]; then
  [[ ${#pair[@]} == 2 && ${pair[0]} == egressd* && ${pair[1]} == egressd* ]] ||
    { echo "bench/inspect: PAIRED takes two egressd peers (egressd, egressd-b, egressd-cred)" >&2; exit 2; }
fi
[[ " $H2_PEERS " == *" squid "* ]] && { echo "bench/inspect: squid 5.7 has no HTTP/2; H2_PEERS takes egressd, goproxy" >&2; exit 2; }
BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

[[ -x /usr/sbin/squid ]] && /usr/sbin/squid -v | grep -q -- --with-openssl ||
  { echo "bench/inspect: needs squid built with OpenSSL (Debian: squid-openssl)" >&2; exit 1; }
certgen=/usr/lib/squid/security_file_certgen
[[ -x $certgen ]] || { echo "bench/inspect: $certgen missing" >&2; exit 1; }
command -v dnsmasq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsmasq-base; }
grep -qE '^127\.0\.0\.1[[:space:]].*\bup\.bench\.test\b' /etc/hosts || echo '127.0.0.1 up.bench.test' >> /etc/hosts
ulimit -n "$(ulimit -Hn)"
# Every port is fixed: a listener already there (another bench on this
# machine) would answer in place of the proxy or origin started here.
for port in 13128 14000 14001 14190 15399 18443 18444 18445; do
  [[ -z $(ss -Hltn "sport = :$port" 2>/dev/null) ]] ||
    { echo "bench/inspect: port $port is already in use (another bench running?)" >&2; exit 1; }
done

mkdir -p "$W/bin" "$OUT/conf" "$LOGS"
rm -f "$LOGS"/*
chmod 0777 "$LOGS"
(cd "$peer" && go build -o "$W/bin/upstream" ./upstream)
# The harness's load client sends `Host: up.bench.test` to port 18443. A
# bumping squid builds the URL from Host (port 443 then) and refuses to send
# it over the tunnel's pinned connection to :18443 (503 "Unable to forward").
# So this bench builds a copy whose requests say `Host: up.bench.test:18443`
# (RFC 9110: a non-default port belongs in Host), the same load for both
# proxies; nothing else in it changes.
src=$OUT/load-src
rm -rf "$src"; mkdir -p "$src/load"; cp "$peer/go.mod" "$src/"; cp "$peer/load/main.go" "$src/load/"
sed -i 's|Host: " + c\.host + |Host: " + c.target + |' "$src/load/main.go"
[[ $(grep -c 'Host: " + c\.target' "$src/load/main.go") == 2 ]] || { echo "bench/inspect: Host patch of the load client did not apply" >&2; exit 1; }
(cd "$src" && go build -o "$W/bin/load-inspect" ./load)
LOAD=$W/bin/load-inspect
(cd "$repo" && make -s build)
# The goproxy peer and the HTTP/2 load are modules of their own (egressd's
# module never gains goproxy).
(cd "$repo/bench/inspect/goproxy" && go build -o "$W/bin/goproxy-inspect" .)
(cd "$repo/bench/inspect/h2load" && go build -o "$W/bin/h2load" .)
H2LOAD=$W/bin/h2load

# ------------------------------------------------------------ the minting CA (every proxy)
CA=$OUT/mint-ca.pem KEY=$OUT/mint-ca.key
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=egressd inspect bench CA" -addext basicConstraints=critical,CA:TRUE \
  -addext keyUsage=critical,keyCertSign,cRLSign -keyout "$KEY" -out "$CA" 2>/dev/null
chmod 0644 "$KEY"   # squid runs as user proxy; a throwaway CA for loopback only

# ------------------------------------------------------------ process handling
PIDS=()
stop_pid() { # TERM, wait up to 10 s, KILL; the same for its direct children
  local pid=$1 kids i
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kids=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  for k in $kids; do kill -0 "$k" 2>/dev/null && kill -KILL "$k" 2>/dev/null || true; done
  wait "$pid" 2>/dev/null || true
}
CUR=""
PAIR_PIDS=()
cleanup() { stop_pid "$CUR"; for p in "${PAIR_PIDS[@]}" "${PIDS[@]}"; do stop_pid "$p"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

"$W/bin/upstream" -out "$OUT" >"$LOGS/upstream.log" 2>&1 &
UP=$!; PIDS+=("$UP")
"$LOAD" wait -addr 127.0.0.1:18443 -timeout 10s
for _ in $(seq 50); do [[ -s $OUT/ca.pem ]] && break; sleep 0.2; done
ORIGIN_CA=$OUT/ca.pem
# The h2-capable origin for bench/inspect/h2load: the peer bench's origin
# speaks HTTP/1.1 only, and egressd answers the client with the protocol
# the origin chose. Same leaf (up.bench.test, from the origin's CA).
if [[ -n $H2_PEERS ]]; then
  "$H2LOAD" origin -addr 127.0.0.1:18445 -cert "$OUT/leaf.pem" -key "$OUT/leaf-key.pem" >"$LOGS/h2origin.log" 2>&1 &
  H2UP=$!; PIDS+=("$H2UP")
  "$LOAD" wait -addr 127.0.0.1:18445 -timeout 10s
fi

dnsmasq -k --port 15399 --listen-address 127.0.0.1 --bind-interfaces --no-resolv --no-dhcp-interface=lo --local-ttl=60 \
  --conf-file=/dev/null >/dev/null 2>&1 &
PIDS+=("$!")

# ------------------------------------------------------------ squid: standard ssl-bump `bump`
# As the harness's squid.conf, plus the bump: peek at the ClientHello, bump
# everything; leaves from the minting CA through security_file_certgen.
# Inside a bumped tunnel squid checks each request against http_access too,
# with the URL built from the Host header (the load client sends
# `Host: up.bench.test`, so squid sees https://up.bench.test/small, port
# 443): the requests are allowed by host alone (the one setting squid needs
# to work at all). They go over the connection pinned to the CONNECT's
# target, which only up.bench.test:18443 passes.
cat > "$OUT/conf/squid.conf" <<SQUID
http_port 127.0.0.1:13128 ssl-bump tls-cert=$CA tls-key=$KEY generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program $certgen -s $OUT/ssl_db -M 16MB
acl step1 at_step SslBump1
acl step2 at_step SslBump2
ssl_bump peek step1
ssl_bump stare step2
ssl_bump bump all
tls_outgoing_options cafile=$ORIGIN_CA
acl bench_dst dstdomain up.bench.test
acl bench_port port 18443
acl CONNECT method CONNECT
http_access allow CONNECT bench_dst bench_port
http_access allow !CONNECT bench_dst
http_access deny all
cache deny all
cache_mem 8 MB
max_filedescriptors 16384
shutdown_lifetime 1 seconds
access_log stdio:$LOGS/squid-access.log
cache_log $LOGS/squid-cache.log
cache_store_log none
pinger_enable off
pid_filename $LOGS/squid.pid
coredump_dir $LOGS
SQUID

# ------------------------------------------------------------ egressd: inspect: true for the same host
# (port 18445 is the h2 origin's, for bench/inspect/h2load)
cat > "$OUT/conf/policy.yaml" <<'POLICY'
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: bench-inspect, namespace: bench}
spec:
  podSelector: {}
  egress:
    - hosts: [up.bench.test]
      ports: [18443, 18445]
      cidrs: [127.0.0.0/8]
      inspect: true
POLICY
"$repo/bin/egressd" check --inspect --policy "$OUT/conf/policy.yaml" >/dev/null
# egressd-cred: the same rule with a credential (issue 28's A/B): egressd
# sets `Authorization: Bearer <36 bytes>` on every request it forwards.
sed 's/^      inspect: true$/      inspect: true\n      credential: {name: bench}/' "$OUT/conf/policy.yaml" >"$OUT/conf/policy-cred.yaml"
grep -q 'credential: {name: bench}' "$OUT/conf/policy-cred.yaml" || { echo "bench/inspect: credential rule not written" >&2; exit 1; }
mkdir -p "$OUT/conf/credentials"
printf 'sk-bench-0123456789abcdef0123456789ab\n' >"$OUT/conf/credentials/bench"
"$repo/bin/egressd" check --inspect --policy "$OUT/conf/policy-cred.yaml" --credentials-dir "$OUT/conf/credentials" >/dev/null

start_proxy() { # start_proxy NAME [PORT]: sets CUR (PID), ADDR; PORT (egressd only) defaults to 14000
  case $1 in
    squid)
      rm -rf "$OUT/ssl_db"
      "$certgen" -c -s "$OUT/ssl_db" -M 16MB >/dev/null
      chown -R proxy:proxy "$OUT/ssl_db" 2>/dev/null || true
      /usr/sbin/squid -N -f "$OUT/conf/squid.conf" >>"$LOGS/squid.stdout" 2>&1 &
      CUR=$!; ADDR=127.0.0.1:13128 ;;
    egressd|egressd-b|egressd-cred) # egressd-b: egressd again, for an A/A of the PAIRED instrument
      local extra=(--policy "$OUT/conf/policy.yaml")
      [[ $1 == egressd-cred ]] && extra=(--policy "$OUT/conf/policy-cred.yaml" --credentials-dir "$OUT/conf/credentials")
      env GODEBUG=schedtrace=2147483647 "$repo/bin/egressd" run "${extra[@]}" \
        --pods "$repo/bench/peer/pods.yaml" --upstream-dns 127.0.0.1:15399 --proxy-addr "127.0.0.1:${2:-14000}" \
        --dns-addr '' --metrics-addr '' --max-conns-per-client 20000 \
        --inspect-ca-cert "$CA" --inspect-ca-key "$KEY" --upstream-ca "$ORIGIN_CA" >>"$LOGS/egressd.stdout" 2>&1 &
      CUR=$!; ADDR=127.0.0.1:${2:-14000} ;;
    goproxy)
      # The same allow rule: the host and ports above, 127.0.0.0/8.
      "$W/bin/goproxy-inspect" -addr 127.0.0.1:14190 -ca-cert "$CA" -ca-key "$KEY" -upstream-ca "$ORIGIN_CA" \
        -allow up.bench.test:18443,up.bench.test:18445 -cidr 127.0.0.0/8 >>"$LOGS/goproxy.stdout" 2>&1 &
      CUR=$!; ADDR=127.0.0.1:14190 ;;
  esac
}

STAMP=$(date -u +%Y%m%d-%H%M%S)
RAW=$OUT/raw-$STAMP.jsonl H2RAW=$OUT/raw-h2-$STAMP.jsonl
: >"$RAW"; : >"$H2RAW"
T0=$(date +%s)
read -ra peers <<<"$PEERS"
for round in $(seq 1 "$ROUNDS"); do
  # Each round starts one peer later than the one before: no peer always
  # runs first (or right after another).
  k=$(( (round - 1) % (${#peers[@]} > 0 ? ${#peers[@]} : 1) ))
  for name in "${peers[@]:k}" "${peers[@]:0:k}"; do
    "$LOAD" quiet -max 0.3 -timeout 20s 2>>"$LOGS/quiet.log" || true
    start_proxy "$name"
    if ! "$LOAD" wait -addr "$ADDR" -timeout 15s; then
      log "$name: did not start (see $LOGS/$name.stdout)"; stop_pid "$CUR"; CUR=""; continue
    fi
    # squid's certificate helpers are its children: count their CPU too.
    pids=$CUR; for k in $(ps -o pid= --ppid "$CUR" 2>/dev/null); do pids+=",$k"; done
    log "round $round/$ROUNDS: $name (pids $pids)"
    # shellcheck disable=SC2086
    if ! timeout -k 5 "$BENCH_TIMEOUT" "$LOAD" bench -name "$name" -round "$round" -proxy "http://$ADDR" \
         -pid "$pids" -upstream-pid "$UP" -ca "$CA" -tests check,idle,thr,nc,ka -out "$RAW" $BENCH_ARGS 2>>"$LOGS/load.log"; then
      log "$name: load bench failed (see $LOGS/load.log)"
    fi
    grep "^\[$name r$round\]" "$LOGS/load.log" | tail -n 6 >&2 || true
    stop_pid "$CUR"; CUR=""
    sleep 1
  done
  # HTTP/1.1 and HTTP/2 inside the tunnel through one fresh process per
  # peer; which protocol goes first alternates by round.
  protos="h1 h2"; (( round % 2 == 0 )) && protos="h2 h1"
  for name in $H2_PEERS; do
    "$LOAD" quiet -max 0.3 -timeout 20s 2>>"$LOGS/quiet.log" || true
    start_proxy "$name"
    if ! "$LOAD" wait -addr "$ADDR" -timeout 15s; then
      log "$name (h2 load): did not start"; stop_pid "$CUR"; CUR=""; continue
    fi
    log "round $round/$ROUNDS: $name, h2load ($protos)"
    for proto in $protos; do
      # shellcheck disable=SC2086
      timeout -k 5 "$BENCH_TIMEOUT" "$H2LOAD" bench -name "$name" -proto "$proto" -round "$round" -proxy "$ADDR" \
        -target up.bench.test:18445 -pid "$CUR" -ca "$CA" -out "$H2RAW" $H2_ARGS 2>>"$LOGS/h2load.log" ||
        log "$name $proto: h2load failed (see $LOGS/h2load.log)"
      grep "^\[$name $proto r$round\]" "$LOGS/h2load.log" | tail -n 4 >&2 || true
    done
    stop_pid "$CUR"; CUR=""
    sleep 1
  done
done

# ------------------------------------------------------------ PAIRED: two egressd peers at once
# Both proxies run side by side, each with its own load client (the
# BENCH_ARGS tests, keep-alive for issue 28), on the same origin: whatever
# the machine does during a round (the ±10-25% it moves between rounds),
# it does to both. Odd rounds start A first on :14000, even rounds B.
PRAW=$OUT/raw-paired-$STAMP.jsonl
if [[ -n $PAIRED ]]; then
  : >"$PRAW"
  for round in $(seq 1 "$ROUNDS"); do
    order=("${pair[0]}" "${pair[1]}")
    (( round % 2 == 0 )) && order=("${pair[1]}" "${pair[0]}")
    "$LOAD" quiet -max 0.3 -timeout 20s 2>>"$LOGS/quiet.log" || true
    addrs=() PAIR_PIDS=()
    for i in 0 1; do
      start_proxy "${order[i]}" $((14000 + i))
      PAIR_PIDS+=("$CUR"); addrs+=("$ADDR"); CUR=""
    done
    for i in 0 1; do "$LOAD" wait -addr "${addrs[i]}" -timeout 15s; done
    log "round $round/$ROUNDS: ${order[0]} and ${order[1]} at once (pids ${PAIR_PIDS[*]})"
    loads=()
    for i in 0 1; do
      # shellcheck disable=SC2086
      timeout -k 5 "$BENCH_TIMEOUT" "$LOAD" bench -name "${order[i]}" -round "$round" -proxy "http://${addrs[i]}" \
        -pid "${PAIR_PIDS[i]}" -upstream-pid "$UP" -ca "$CA" -tests check,ka -out "$PRAW" $BENCH_ARGS 2>>"$LOGS/load.log" &
      loads+=("$!")
    done
    wait "${loads[@]}" || log "paired round $round: a load bench failed (see $LOGS/load.log)"
    for p in "${PAIR_PIDS[@]}"; do stop_pid "$p"; done
    PAIR_PIDS=()
    sleep 1
  done
fi

header="Date: $(date -u '+%Y-%m-%d %H:%M UTC') · nproc: $(nproc) · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) · $(go version | cut -d' ' -f3) · rounds: $ROUNDS · wall: $(( $(date +%s) - T0 )) s
Versions: squid: $(/usr/sbin/squid -v | head -1) (ssl-bump bump); egressd: $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet HEAD -- . ':!bench/inspect' || echo '+dirty') (inspect: true); goproxy: $(grep -m1 -o 'elazarl/goproxy v[^ ]*' "$repo/bench/inspect/goproxy/go.mod" | cut -d' ' -f2) (ConnectMitm); peers: ${PEERS:-none}
Inspected tunnels: the client trusts only the minting CA; every proxy verifies the origin against its CA. Client, proxies and origin share the same $(nproc) cores on 127.0.0.1. Raw data: $(basename "$RAW").
"
echo
printf '%s\n' "$header"
[[ -s $RAW ]] && "$LOAD" report -in "$RAW" -md "$OUT/results.md" -header "$header"
if [[ -s $PRAW ]]; then
  echo
  echo "PAIRED: ${pair[0]} and ${pair[1]} at the same time (raw data: $(basename "$PRAW")); proxy CPU per keep-alive request, µs:"
  # One line per round: each peer's CPU per request and B/A.
  sed -nE 's/.*"name":"([^"]*)","proxy":"[^"]*","round":([0-9]+),.*"keep_alive":\{"requests":([0-9]+),.*"proxy_cpu_s":([0-9.]+).*/\2 \1 \3 \4/p' "$PRAW" |
    awk -v a="${pair[0]}" -v b="${pair[1]}" '
      { cpu[$1, $2] = $4 * 1e6 / $3; if ($1 > n) n = $1 }
      END { for (r = 1; r <= n; r++) if ((r, a) in cpu && (r, b) in cpu)
              printf "round %d: %s %.2f  %s %.2f  %s/%s %.3f\n", r, a, cpu[r, a], b, cpu[r, b], b, a, cpu[r, b] / cpu[r, a] }' |
    tee "$OUT/paired.txt"
  awk '{ print $NF }' "$OUT/paired.txt" | sort -n |
    awk -v what="${pair[1]}/${pair[0]}" '{ v[NR] = $1 } END { if (NR) printf "median %s of %d rounds: %.3f\n", what, NR, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
fi
if [[ -s $H2RAW ]]; then
  echo
  echo "HTTP/1.1 and HTTP/2 inside the inspected tunnel (bench/inspect/h2load, origin :18445; raw data: $(basename "$H2RAW")):"
  echo
  "$H2LOAD" report -in "$H2RAW" -md "$OUT/results-h2.md"
fi
