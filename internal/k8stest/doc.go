// Package k8stest starts a real etcd and kube-apiserver for tests, on free
// loopback ports in a temporary directory, and installs the EgressPolicy CRD.
//
// The binaries are built from Go modules by scripts/k8s-test-env.sh into the
// repo-ignored .tools/bin (or the directory in EGRESSD_K8S_BIN). When they are
// missing, tests fail with the command to run; they skip only when
// EGRESSD_SKIP_K8S=1, so CI never passes by silently skipping.
//
// There is no controller-manager and no kubelet: Pods are objects only
// (tests set status.podIPs through the status subresource) and
// ServiceAccounts are created by the tests that need them.
//
// Test-only: nothing outside _test.go files may import it.
package k8stest
