#!/usr/bin/env bash
# Test dependencies of the Kubernetes area (package kube, internal/k8stest,
# test/rollout): etcd, kube-apiserver, kube-proxy and kube-controller-manager
# built from Go modules into .tools/bin; iproute2 and iptables from apt where
# missing (the harness makes its keys with crypto/rsa, no openssl). Idempotent:
# k8s-test-env.sh skips binaries already built at the wanted version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# test/rollout's Service dataplane: ip(8) for the network namespaces and
# iptables, which kube-proxy calls (Debian's, nf_tables backend).
need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
if ((${#need[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

exec ./scripts/k8s-test-env.sh
