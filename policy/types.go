package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind of the EgressPolicy document, in files and as a
// Kubernetes custom resource.
const (
	Group      = "egressd.dev"
	Version    = "v1alpha1"
	Kind       = "EgressPolicy"
	APIVersion = Group + "/" + Version
)

// EgressPolicy is one allow-list document. The same type is read from YAML
// files and from the EgressPolicy custom resource: one source of truth.
type EgressPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressPolicySpec   `json:"spec"`
	Status EgressPolicyStatus `json:"status,omitempty"`
}

// EgressPolicySpec selects pods and lists what they may reach.
type EgressPolicySpec struct {
	// PodSelector is a standard LabelSelector; {} selects every pod of the
	// namespace.
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// ServiceAccountNames, when non-empty, further requires the pod's
	// service account to be one of them.
	ServiceAccountNames []string `json:"serviceAccountNames,omitempty"`
	// Egress rules; additive, allow-only.
	Egress []EgressRule `json:"egress"`
	// Mode is audit or enforce; empty means the instance's --mode. A
	// request no rule allows is allowed with would_deny when a policy in
	// audit mode selects the pod.
	Mode Mode `json:"mode,omitempty"`
}

// EgressRule allows a set of host patterns on a set of ports.
type EgressRule struct {
	// Name identifies the rule in records (rule_name), reports, explain,
	// suggest and Events, stable when rules are inserted before it: a DNS
	// label, unique within its policy. Empty: the rule is known by its
	// index only.
	Name  string   `json:"name,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
	Ports []int32  `json:"ports"`
	// CIDRs lets the rule reach non-public addresses and IP-literal
	// destinations inside them.
	CIDRs   []string `json:"cidrs,omitempty"`
	Purpose string   `json:"purpose,omitempty"`
	Owner   string   `json:"owner,omitempty"`
	// Phase "init" makes the rule match only until the pod's Initialized
	// condition is True; empty means always.
	Phase string `json:"phase,omitempty"`
	// ECH "allow" accepts ClientHellos with Encrypted Client Hello (and so
	// the front's other tenants); empty refuses them (reason ech).
	ECH string `json:"ech,omitempty"`
	// Inspect has egressd terminate the tunnel's TLS with a leaf of its
	// inspection CA and decide each HTTP request inside (docs/design.md
	// "Inspection"); false relays the tunnel blind, as always.
	Inspect bool `json:"inspect,omitempty"`
	// HTTP entries limit an inspected rule's requests by method and path;
	// empty allows any. Only with Inspect.
	HTTP []HTTPRule `json:"http,omitempty"`
	// Credential has egressd set a header holding a credential it holds
	// on every request of this rule it allows (docs/design.md
	// "Credentials"); nil adds none. Only with Inspect and hosts without
	// wildcards.
	Credential *Credential `json:"credential,omitempty"`
}

// Values of EgressRule.Phase and EgressRule.ECH.
const (
	PhaseInit = "init"
	ECHAllow  = "allow"
)

// EgressPolicyStatus is written by egressd in Kubernetes.
type EgressPolicyStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// Document is an EgressPolicy with where it came from, for error messages
// ("policies/llm.yaml: document 2", "EgressPolicy llm-prod/llm-bootstrap").
type Document struct {
	Origin string
	Policy EgressPolicy

	// file, prefix and pos place a field of a document Parse read:
	// where(field) is file:line:column of pos[prefix+field].
	file, prefix string
	pos          positions
}
