#!/usr/bin/env bash
# Image tools (make image, test/image): buildah builds, podman runs with
# runc, skopeo reads archives; Debian's packages, no registry. Writes
# .tools/containers/containers.conf, which scripts/image.sh and test/image
# pass in CONTAINERS_CONF: no rlimits set on containers (machines that
# forbid setting them refuse podman's default nofile/nproc limits otherwise)
# and runc as the runtime (crun fails on a hybrid cgroup hierarchy).
# Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
missing=()
for tool in buildah podman runc skopeo; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -s /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
mkdir -p .tools/containers
conf=.tools/containers/containers.conf
want='# written by scripts/deps/image.sh
[containers]
default_ulimits = []

[engine]
runtime = "runc"
'
if [ "$(cat "$conf" 2>/dev/null)" != "${want%$'\n'}" ]; then
  printf '%s' "$want" >"$conf"
fi
