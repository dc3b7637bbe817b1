#!/usr/bin/env bash
# Builds the binaries the Kubernetes tests need (etcd, kube-apiserver,
# kube-proxy, kube-controller-manager) from Go modules into .tools/bin, the
# repo-ignored tools directory. Idempotent: a binary already built at the
# wanted version (its .version stamp) is kept.
#
# Neither project can be `go install`ed directly (their go.mod files carry
# local replace directives), so a small wrapper module is generated for
# etcd and one for the three Kubernetes commands under .tools/src. See docs
# in internal/k8stest. Cold, the Kubernetes build is about 6 minutes of CPU
# (kube-proxy and kube-controller-manager after kube-apiserver: measured 6
# min user time, 23 min wall on a 2-core machine shared with other builds).
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-v3.6.13}"
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
# The staging modules (k8s.io/api, ...) are versioned v0.X.Y for kubernetes v1.X.Y.
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${EGRESSD_TOOLS_DIR:-$ROOT/.tools}"
BIN="$TOOLS/bin"
SRC="$TOOLS/src"
mkdir -p "$BIN" "$SRC"

# Wrapper modules must not inherit the repo's module or workspace.
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"

have_version() { # file stamp
	[[ -x "$1" && -f "$1.version" && "$(cat "$1.version")" == "$2" ]]
}

build_etcd() {
	if have_version "$BIN/etcd" "$ETCD_VERSION"; then
		echo "k8s-test-env: etcd $ETCD_VERSION present"
		return
	fi
	echo "k8s-test-env: building etcd $ETCD_VERSION"
	local dir="$SRC/etcd-$ETCD_VERSION"
	mkdir -p "$dir"
	cat >"$dir/go.mod" <<GOMOD
module egressd.local/tools/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
	cat >"$dir/main.go" <<'GO'
// Command etcd is a thin wrapper so etcd can be built from its Go module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	(cd "$dir" && go mod tidy && go build -o "$BIN/etcd.tmp" .)
	mv "$BIN/etcd.tmp" "$BIN/etcd"
	echo "$ETCD_VERSION" >"$BIN/etcd.version"
}

# The Kubernetes components the tests run, built from one wrapper module:
# kube-apiserver (every Kubernetes test), kube-proxy and
# kube-controller-manager (test/rollout's Service dataplane). Missing ones
# are built in one `go build` invocation, which compiles the packages they
# share (client-go, apiserver, component-base, ...) once.
KUBE_COMPONENTS=(kube-apiserver kube-proxy kube-controller-manager)

build_kube() {
	local missing=() c
	for c in "${KUBE_COMPONENTS[@]}"; do
		if have_version "$BIN/$c" "$KUBE_VERSION"; then
			echo "k8s-test-env: $c $KUBE_VERSION present"
		else
			missing+=("$c")
		fi
	done
	[[ ${#missing[@]} -gt 0 ]] || return 0
	echo "k8s-test-env: building ${missing[*]} $KUBE_VERSION (several minutes cold)"
	local dir="$SRC/kubernetes-$KUBE_VERSION"
	mkdir -p "$dir"
	# k8s.io/kubernetes replaces its staging modules with ./staging paths;
	# map every one of them to the published module at the matching version.
	local gomod
	gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
	[[ -f "$gomod" ]] || { echo "k8s-test-env: cannot locate k8s.io/kubernetes go.mod" >&2; exit 1; }
	{
		echo "module egressd.local/tools/kubernetes"
		echo
		echo "go 1.26.0"
		echo
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		echo
		echo "replace ("
		grep -E '^[[:space:]]*k8s\.io/[^ ]+ => \./staging/src/' "$gomod" |
			awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
		echo ")"
	} >"$dir/go.mod"
	{
		echo "//go:build tools"
		echo
		echo "// Package tools pins the Kubernetes commands so \`go mod tidy\` keeps them."
		echo "package tools"
		echo
		echo "import ("
		for c in "${KUBE_COMPONENTS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
		echo ")"
	} >"$dir/tools.go"
	local out="$BIN/.kube-build" pkgs=()
	rm -rf "$out" && mkdir -p "$out"
	for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	(cd "$dir" && go mod tidy &&
		go build -ldflags "-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" -o "$out/" "${pkgs[@]}")
	for c in "${missing[@]}"; do
		mv "$out/$c" "$BIN/$c"
		echo "$KUBE_VERSION" >"$BIN/$c.version"
	done
	rm -rf "$out"
}

build_etcd
build_kube
echo "k8s-test-env: binaries in $BIN"
