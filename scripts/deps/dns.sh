#!/usr/bin/env bash
# Tools the resolver tests and DNS benchmark need: dig (resolver tests),
# dnsperf and dnsmasq (bench/dns). Idempotent: installs only what is missing.
set -euo pipefail

need=()
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
command -v dnsperf >/dev/null 2>&1 || need+=(dnsperf)
command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)

if ((${#need[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
