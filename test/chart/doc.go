// Package chart holds the tests of the Helm chart at charts/egressd: helm
// lint --strict and helm template with default values and with every option
// on (charts/egressd/ci/all-on-values.yaml), every rendered object applied
// with a server-side dry run to a real kube-apiserver (internal/k8stest), and
// the rendered NetworkPolicies compared with netpol.NetworkPolicies, the
// generator behind `egressd netpol`, for the same settings. The `helm test`
// hook Pod is checked for the identity it runs under and a probe file that
// `egressd probe` parses (probe_test.go); the PrometheusRule against the
// alerts of docs/operations.md and the Grafana dashboard against the
// metrics egressd exports (monitoring_test.go). Operator CRDs the test API
// server lacks (ServiceMonitor, PrometheusRule) are stood in for by CRDs
// that check kind and metadata.
//
// helm comes from scripts/deps/helm.sh (.tools/bin/helm). Without it the
// tests fail with that command; they skip only when EGRESSD_SKIP_HELM=1.
//
// It has no non-test code and must not be imported.
package chart
