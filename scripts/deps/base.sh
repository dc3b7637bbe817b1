#!/usr/bin/env bash
# Base tools the tests drive as real clients: curl, python3 (urllib through
# inspected tunnels; requests, whose "Tunnel connection failed" must carry
# egressd's reason: Debian's python3-requests for Debian's python3, the test
# falls back to http.client elsewhere), wget (its "Proxy tunneling failed"),
# and ip (iproute2) for the network namespaces of the injection end-to-end
# test (test/webhook), openssl (bench/inspect's squid CA; the demo makes its
# CAs in Go). Idempotent.
set -euo pipefail
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
if [[ "$(command -v python3 || true)" == /usr/bin/python3 ]]; then
  python3 -c 'import requests' 2>/dev/null || missing+=(python3-requests)
fi
command -v wget >/dev/null || missing+=(wget)
command -v ip >/dev/null || missing+=(iproute2)
command -v openssl >/dev/null || missing+=(openssl)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
