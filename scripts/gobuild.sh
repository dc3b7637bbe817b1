#!/usr/bin/env bash
# The egressd binary as it ships (make image, make release): static
# (CGO_ENABLED=0), -trimpath (no path of the build machine), -buildvcs=false
# (the bytes are a function of the source, not of the checkout's .git: the
# version and revision come in with -X and the SBOM), stripped.
# Usage: scripts/gobuild.sh GOARCH VERSION OUTPUT
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
arch=$1 version=$2 output=$3
CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=false \
  -ldflags "-s -w -buildid= -X main.version=$version" -o "$output" ./cmd/egressd
