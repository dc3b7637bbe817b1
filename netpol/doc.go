// Package netpol owns egressd's NetworkPolicies (docs/design.md
// "NetworkPolicy"): NetworkPolicies generates the set that makes egressd the
// only way out of a namespace (generate.go, behind `egressd netpol` and
// mirrored by the chart), and Check finds the paths out that existing
// NetworkPolicies leave open (check.go, behind `egressd netpol --check` and
// kube.CheckNamespace).
//
// Flow: Options → Validate → NetworkPolicies (every ipBlock excepts
// policy.NeverPrefixes); for --check, the namespace's NetworkPolicies →
// Check → one Bypass per open path.
//
// It is pure like policy: data in, API objects out. It imports k8s.io/api
// types and apimachinery, and of this module only policy (the never
// ranges); never client-go (kube applies and lists), never the serving
// packages. internal/archtest holds that line.
package netpol
