#!/usr/bin/env bash
# make image: the egressd image, offline, with buildah (no registry, no
# pull: the Dockerfile is FROM scratch). Steps:
#   1. the build context (make image-context): the static binary, Debian's
#      CA bundle, image/passwd and image/group, each dated at the commit;
#   2. buildah bud --isolation chroot with the commit's time as the image's
#      creation time and every file's mtime (--timestamp), so the same
#      commit and CA bundle give the same image digest;
#   3. the image in local storage as egressd:VERSION, and an OCI archive
#      out/egressd-VERSION.oci.tar (re-packed at the commit's time,
#      scripts/reprotar.sh: the same commit gives the same archive) with
#      its manifest digest beside it (.digest) and printed.
# On a release tag (git describe: vX.Y.Z) VERSION is the tag, the chart's
# appVersion: the image the chart renders by default (test/release).
# Usage: scripts/image.sh [context|build|tag]   (default build; tag prints
# the image name and tag, egressd:VERSION, and builds nothing)
# Environment: VERSION (git describe), OUT (out), GOARCH (the host's),
# IMAGE_STORAGE_DRIVER (vfs), IMAGE_ROOT / IMAGE_RUNROOT (containers/storage
# locations; empty: the defaults), LICENSES (NOASSERTION: the repository
# carries no license file).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step=${1:-build}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
tag=egressd:$version
if [ "$step" = tag ]; then
  echo "$tag"
  exit 0
fi
out=${OUT:-out}
ctx=$out/image-context
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
arch=${GOARCH:-$(go env GOARCH)}

rm -rf "$ctx"
mkdir -p "$ctx/etc/ssl/certs"
scripts/gobuild.sh "$arch" "$version" "$ctx/egressd"
cp image/passwd image/group "$ctx/etc/"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/etc/ssl/certs/"
chmod 0644 "$ctx/etc/passwd" "$ctx/etc/group" "$ctx/etc/ssl/certs/ca-certificates.crt"
chmod 0755 "$ctx/egressd"
find "$ctx" -exec touch -h -d "@$epoch" {} +
if [ "$step" = context ]; then
  echo "$ctx"
  exit 0
fi

export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/.tools/containers/containers.conf}
store=(--storage-driver "${IMAGE_STORAGE_DRIVER:-vfs}")
[ -n "${IMAGE_ROOT:-}" ] && store+=(--root "$IMAGE_ROOT")
[ -n "${IMAGE_RUNROOT:-}" ] && store+=(--runroot "$IMAGE_RUNROOT")
buildah "${store[@]}" bud --isolation chroot --timestamp "$epoch" --identity-label=false \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg CREATED="$created" \
  --build-arg LICENSES="${LICENSES:-NOASSERTION}" \
  -f Dockerfile -t "$tag" "$ctx" >&2
archive=$out/egressd-$version.oci.tar
rm -f "$archive"
buildah "${store[@]}" push --quiet "$tag" "oci-archive:$archive:$tag" >&2
scripts/reprotar.sh "$archive" "$epoch"
digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$archive")
echo "$digest" >"$archive.digest"
echo "image $tag (local storage), $archive, digest $digest"
