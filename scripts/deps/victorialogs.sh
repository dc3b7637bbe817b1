#!/usr/bin/env bash
# Installs VictoriaLogs (the log engine of the export tests: package export,
# cmd/egressd's export end-to-end test) into the repo's ignored .tools/bin,
# built from its Go module: no network but the Go module proxy is needed.
# Its go.mod has no replace directives, so `go install pkg@version` builds it
# outside egressd's module (egressd's go.mod never gains it). About a minute
# of CPU cold. Idempotent: skips when that version is already there.
set -euo pipefail

VICTORIALOGS_VERSION="${VICTORIALOGS_VERSION:-v1.52.1}"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${EGRESSD_TOOLS_DIR:-$repo/.tools}/bin"

if [[ -x "$bin/victoria-logs" && -f "$bin/victoria-logs.version" && "$(cat "$bin/victoria-logs.version")" == "$VICTORIALOGS_VERSION" ]]; then
	echo "victorialogs: $VICTORIALOGS_VERSION already in $bin"
	exit 0
fi

mkdir -p "$bin"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# GOFLAGS and GOWORK cleared: the caller's settings do not apply to pkg@version.
GOBIN="$tmp" GOFLAGS= GOWORK=off go install -trimpath -ldflags "-s -w" \
	"github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@$VICTORIALOGS_VERSION"
mv "$tmp/victoria-logs" "$bin/victoria-logs"
echo "$VICTORIALOGS_VERSION" >"$bin/victoria-logs.version"
echo "victorialogs: $VICTORIALOGS_VERSION in $bin"
