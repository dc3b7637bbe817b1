#!/usr/bin/env bash
# Base tools the tests drive as real clients: curl, python3 (urllib through
# inspected tunnels). Idempotent.
set -euo pipefail
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
