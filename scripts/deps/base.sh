#!/usr/bin/env bash
# Base tools the tests drive as real clients: curl. Idempotent.
set -euo pipefail
missing=()
command -v curl >/dev/null || missing+=(curl)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
