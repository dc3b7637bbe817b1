#!/usr/bin/env bash
# Installs cyclonedx-gomod (the SBOM of make release: CycloneDX, from the
# binary's module list and go.sum) into the repo's ignored .tools/bin, built
# from its Go module: no network but the Go module proxy is needed.
# Idempotent: skips when that version is already there.
set -euo pipefail

CYCLONEDX_GOMOD_VERSION="${CYCLONEDX_GOMOD_VERSION:-v1.10.0}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$repo/.tools/bin"

if [[ -x "$bin/cyclonedx-gomod" && "$(cat "$bin/cyclonedx-gomod.version" 2>/dev/null)" == "$CYCLONEDX_GOMOD_VERSION" ]]; then
	echo "cyclonedx-gomod: $CYCLONEDX_GOMOD_VERSION already in $bin"
	exit 0
fi
mkdir -p "$bin"
# GOFLAGS cleared: a -mod setting from the caller does not apply to pkg@version.
GOBIN="$bin" GOFLAGS= go install -trimpath -ldflags "-s -w" \
	"github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
echo "$CYCLONEDX_GOMOD_VERSION" >"$bin/cyclonedx-gomod.version"
