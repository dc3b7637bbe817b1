// Package kube adapts the Kubernetes API to egressd: it watches the Pods and
// EgressPolicy objects of one namespace (client-go informers), feeds the
// identity.Store and the policy snapshot, writes each EgressPolicy's Accepted
// condition through the status subresource, applies and checks the
// NetworkPolicies of policy.NetworkPolicies, puts a Warning Event
// (EgressDenied) on a pod whose request was denied (EventEmitter, fed with
// audit records), reaches the injection webhook's certificate Secret and
// MutatingWebhookConfiguration with plain REST calls (webhookcert.go: the
// webhook package's SecretStore and CABundlePatcher, wired in cmd), and
// declares the RBAC rules egressd needs (RoleRules; the webhook's in
// kube/rbac). It
// embeds the EgressPolicy CRD (crd.yaml, a byte-identical copy of
// charts/egressd/crds/egresspolicies.yaml).
//
// Flow: informer event → one work item per kind ("pods", "policies") → the
// worker rebuilds from the lister: identity.Store.Replace(all pods), which
// notifies the store's subscribers when an identity changed (revocation of
// open connections), or policy.Validate each EgressPolicy alone,
// policy.Compile the good ones (an invalid version keeps its previous good
// one in force), SetPolicy, then status writes. Losing the API server keeps
// the last snapshot and index in force; egressd_policy_source_stale is 1
// until lists and watches succeed again.
//
// Events: the audit record of a denial → EventEmitter.Record (the audit
// logger's hook; cheap, never blocks) → at most one per pod, host and reason
// per interval → client-go's recorder (queue, aggregation, spam filter) →
// an Event on the Pod, created or, when repeated, patched.
//
// It may import policy, identity, audit (the record, for Events) and metrics
// of this module and client-go; it must not import proxy, resolver or cmd.
package kube
