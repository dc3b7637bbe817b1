#!/usr/bin/env bash
# Test dependencies of the Kubernetes area (package kube, internal/k8stest,
# test/rollout): etcd, kube-apiserver, kube-proxy and kube-controller-manager
# built from Go modules into .tools/bin. No apt
# package is needed (the harness makes its keys with crypto/rsa). Idempotent:
# k8s-test-env.sh skips binaries already built at the wanted version.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec ./scripts/k8s-test-env.sh
