#!/usr/bin/env bash
# make release VERSION=V: what a release publishes, in OUT (out/):
#   egressd-V-linux-amd64, egressd-V-linux-arm64   static binaries (scripts/gobuild.sh)
#   egressd-V.cdx.json                             CycloneDX SBOM of the binary (cyclonedx-gomod bin)
#   egressd-CHART.tgz                              the chart (helm package; version and appVersion V,
#                                                  so that it renders the image egressd:V)
#   egressd-V.oci.tar (+ .digest)                  the linux/amd64 image egressd:V (scripts/image.sh)
#   SHA256SUMS                                     of all of the above
# Every file is reproducible: the same commit gives the same bytes, in any
# folder and at any time. Every timestamp is the commit's (the binaries
# have none; the SBOM is written without; the chart and the image archive
# are re-packed by scripts/reprotar.sh at the commit's time). test/release
# builds twice and compares.
# Usage: scripts/release.sh [binaries|packages]
#   binaries: only the binaries and SHA256SUMS; packages: only the chart,
#   the image archive and SHA256SUMS (of those).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${VERSION:?make release needs VERSION=vX.Y.Z}"
out=${OUT:-out}
export PATH=$PWD/.tools/bin:$PATH
mkdir -p "$out"
case $VERSION in
v[0-9]*.[0-9]*.[0-9]*) ;;
*) echo "make release: VERSION=$VERSION: want a release tag vX.Y.Z (SemVer 2 with its v): the image tag and the chart's appVersion" >&2; exit 2 ;;
esac
step=${1:-all}
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
files=()
if [ "$step" != packages ]; then
  for arch in amd64 arm64; do
    bin=egressd-$VERSION-linux-$arch
    scripts/gobuild.sh "$arch" "$VERSION" "$out/$bin"
    files+=("$bin")
  done
fi
if [ "$step" = all ]; then
  # The SBOM of the binary as shipped: its module list (go version -m,
  # with each module's go.sum hash) and the Go standard library; amd64 and
  # arm64 link the same modules. No serial number or timestamp, so that it
  # repeats too.
  sbom=egressd-$VERSION.cdx.json
  cyclonedx-gomod bin -json -std -noserial -notimestamp -version "$VERSION" \
    -output "$out/$sbom" "$out/egressd-$VERSION-linux-amd64" >&2
  files+=("$sbom")
fi
if [ "$step" != binaries ]; then
  # Helm wants SemVer 2 without the leading v; the appVersion is the image
  # tag, VERSION itself (scripts/image.sh tags egressd:VERSION).
  chart_version=${VERSION#v}
  helm package charts/egressd --version "$chart_version" --app-version "$VERSION" --destination "$out" >&2
  scripts/reprotar.sh "$out/egressd-$chart_version.tgz" "$epoch"
  files+=("egressd-$chart_version.tgz")
  OUT=$out VERSION=$VERSION GOARCH=amd64 scripts/image.sh >&2
  files+=("egressd-$VERSION.oci.tar")
fi
(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release $VERSION in $out:"
(cd "$out" && cat SHA256SUMS)
