#!/usr/bin/env bash
# make release VERSION=V: what a release publishes, in OUT (out/):
#   egressd-V-linux-amd64, egressd-V-linux-arm64   static binaries (scripts/gobuild.sh)
#   egressd-V.cdx.json                             CycloneDX SBOM of the binary (cyclonedx-gomod bin)
#   egressd-CHART.tgz                              the chart (helm package; version and appVersion V)
#   egressd-V.oci.tar (+ .digest)                  the linux/amd64 image (scripts/image.sh)
#   SHA256SUMS                                     of all of the above
# The binaries are reproducible: the same commit gives the same bytes, in
# any folder (test/release builds twice and compares).
# Usage: scripts/release.sh [binaries]   (binaries: only the binaries and SHA256SUMS)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${VERSION:?make release needs VERSION=vX.Y.Z}"
out=${OUT:-out}
export PATH=$PWD/.tools/bin:$PATH
mkdir -p "$out"
files=()
for arch in amd64 arm64; do
  bin=egressd-$VERSION-linux-$arch
  scripts/gobuild.sh "$arch" "$VERSION" "$out/$bin"
  files+=("$bin")
done
if [ "${1:-}" != binaries ]; then
  # The SBOM of the binary as shipped: its module list (go version -m,
  # with each module's go.sum hash) and the Go standard library; amd64 and
  # arm64 link the same modules. No serial number or timestamp, so that it
  # repeats too.
  sbom=egressd-$VERSION.cdx.json
  cyclonedx-gomod bin -json -std -noserial -notimestamp -version "$VERSION" \
    -output "$out/$sbom" "$out/egressd-$VERSION-linux-amd64" >&2
  files+=("$sbom")
  # Helm wants SemVer 2 without the leading v.
  chart_version=${VERSION#v}
  helm package charts/egressd --version "$chart_version" --app-version "$VERSION" --destination "$out" >&2
  files+=("egressd-$chart_version.tgz")
  OUT=$out VERSION=$VERSION GOARCH=amd64 scripts/image.sh >&2
  files+=("egressd-$VERSION.oci.tar")
fi
(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release $VERSION in $out:"
(cd "$out" && cat SHA256SUMS)
