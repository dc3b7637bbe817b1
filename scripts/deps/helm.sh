#!/usr/bin/env bash
# Installs helm (chart lint, template and tests: test/chart) into the repo's
# ignored .tools/bin, built from its Go module: no network but the Go module
# proxy is needed. Idempotent: skips when that build is already there.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
# The Kubernetes version helm assumes without --kube-version; helm's own
# Makefile stamps it from its client-go (v0.37 → 1.37). Unstamped, a module
# build assumes v1.20 and refuses charts with a kubeVersion constraint.
K8S_MAJOR=1
K8S_MINOR=37
stamp="$HELM_VERSION k8s$K8S_MAJOR.$K8S_MINOR"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$repo/.tools/bin"

if [[ -x "$bin/helm" && -f "$bin/helm.version" && "$(cat "$bin/helm.version")" == "$stamp" ]]; then
	echo "helm: $stamp already in $bin"
	exit 0
fi

mkdir -p "$bin"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags+=" -X $pkg.k8sVersionMajor=$K8S_MAJOR -X $pkg.k8sVersionMinor=$K8S_MINOR"
done
# GOFLAGS cleared: a -mod setting from the caller does not apply to pkg@version.
GOBIN="$bin" GOFLAGS= go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo "$stamp" >"$bin/helm.version"
"$bin/helm" version --template 'helm {{.Version}}{{"\n"}}'
