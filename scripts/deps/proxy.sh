#!/usr/bin/env bash
# Test dependencies of the proxy package: curl is the real client of the
# end-to-end tests (CONNECT, redirects, --connect-to for transparent mode).
set -euo pipefail
if ! command -v curl >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends curl ca-certificates
fi
