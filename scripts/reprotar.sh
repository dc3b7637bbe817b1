#!/usr/bin/env bash
# scripts/reprotar.sh FILE EPOCH: rewrites the tar archive FILE (gzip'd
# when it ends in .tgz or .tar.gz) so that its bytes depend only on the
# names and contents of its files: entries sorted by name, every mtime
# EPOCH (the commit's time), owner and group 0, modes a+r (and a+x on
# directories and executables), no atime or ctime, a gzip header without
# name or time. helm package stamps each entry with the time it ran, and
# buildah's oci-archive each file with the time it wrote it: that is what
# made two `make release` runs of one commit differ (test/release).
set -euo pipefail
file=$1
epoch=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/x"
tar -xf "$file" -C "$tmp/x"
(cd "$tmp/x" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort >"$tmp/list")
opts=(--format=gnu --no-recursion --numeric-owner --owner=0 --group=0 --mtime="@$epoch" --mode='a+rX,u+w,go-w' -C "$tmp/x" -T "$tmp/list")
case $file in
*.tgz | *.tar.gz) tar -cf - "${opts[@]}" | gzip -n -9 >"$tmp/out" ;;
*) tar -cf "$tmp/out" "${opts[@]}" ;;
esac
mv -f "$tmp/out" "$file"
