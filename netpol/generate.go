package netpol

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/egressd/egressd/policy"
)

// Defaults shared by `egressd netpol` and the chart (docs/design.md "NetworkPolicy").
const (
	DefaultProxyPort   = 3128
	DefaultDNSPort     = 5353
	DefaultSNIPort     = 8443
	DefaultHTTPPort    = 8080
	DefaultMetricsPort = 9090
	// NameLabel is the label egressd pods carry by default, with value "egressd".
	NameLabel = "app.kubernetes.io/name"
	// NamespaceNameLabel is set by the API server on every namespace
	// (Kubernetes ≥ 1.22); it lets a namespaceSelector name one namespace.
	NamespaceNameLabel = "kubernetes.io/metadata.name"
	// Names of the emitted NetworkPolicies.
	WorkloadsName = "egressd-workloads"
	EgressdName   = "egressd"
)

// Options configures NetworkPolicies. Every zero value has a default,
// applied by NetworkPolicies.
type Options struct {
	// Namespace of egressd and of the workloads; required.
	Namespace string
	// EgressdSelector selects the egressd pods; nil means
	// {app.kubernetes.io/name: egressd}.
	EgressdSelector map[string]string
	// WorkloadSelector selects the pods whose egress goes through egressd;
	// nil means every pod of the namespace but egressd (NotIn on the single
	// EgressdSelector label; with several egressd labels give it explicitly,
	// since "not all of these labels" has no selector form).
	WorkloadSelector *metav1.LabelSelector
	// Container ports of egressd; zero means the default of each.
	ProxyPort, SNIPort, HTTPPort, DNSPort, MetricsPort int32
	// MetricsNamespace may scrape the metrics port; empty means egressd's own
	// namespace only.
	MetricsNamespace string
	// KubeDNSNamespace and KubeDNSSelector name the cluster DNS pods, egressd's
	// upstream for the cluster domain; empty means kube-system and
	// {k8s-app: kube-dns}. NoKubeDNS leaves that peer out (a NodeLocal
	// DNSCache or an external upstream instead).
	KubeDNSNamespace string
	KubeDNSSelector  map[string]string
	NoKubeDNS        bool
	// NodeLocalDNS is a NodeLocal DNSCache address egressd may query on 53.
	// The zero value means none. A link-local or metadata address is refused
	// by Validate (NodeLocal's default 169.254.20.10 included): configure its
	// kube-dns service address instead.
	NodeLocalDNS netip.Addr
	// APIServer are the API server endpoints (the addresses behind the
	// kubernetes Service: NetworkPolicy sees them after DNAT), and
	// APIServerPort their port; zero means 443. Public and private endpoints
	// are already inside egressd's 0.0.0.0/0 rule; the explicit rule keeps the
	// path open if that rule is ever narrowed.
	APIServer     []netip.Prefix
	APIServerPort int32
	// WebhookPort is the injection webhook's container port, open to any
	// source: the API server calls it from the control plane's address,
	// which no selector names (a managed control plane is outside the
	// cluster network). Zero means no webhook (no such rule).
	WebhookPort int32
}

// ErrOptions marks Options that cannot give a safe policy set.
var ErrOptions = errors.New("netpol: invalid NetworkPolicy options")

func (o Options) withDefaults() Options {
	def := func(p *int32, v int32) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.ProxyPort, DefaultProxyPort)
	def(&o.SNIPort, DefaultSNIPort)
	def(&o.HTTPPort, DefaultHTTPPort)
	def(&o.DNSPort, DefaultDNSPort)
	def(&o.MetricsPort, DefaultMetricsPort)
	def(&o.APIServerPort, 443)
	if len(o.EgressdSelector) == 0 {
		o.EgressdSelector = map[string]string{NameLabel: "egressd"}
	}
	if o.KubeDNSNamespace == "" {
		o.KubeDNSNamespace = "kube-system"
	}
	if len(o.KubeDNSSelector) == 0 {
		o.KubeDNSSelector = map[string]string{"k8s-app": "kube-dns"}
	}
	if o.WorkloadSelector == nil && len(o.EgressdSelector) == 1 {
		for k, v := range o.EgressdSelector {
			o.WorkloadSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}},
			}}
		}
	}
	return o
}

// Validate reports options that NetworkPolicies cannot turn into a safe set.
func (o Options) Validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("namespace is required"))
	}
	if o.WorkloadSelector == nil && len(o.EgressdSelector) > 1 {
		errs = append(errs, errors.New("a workload selector is required when the egressd selector has several labels"))
	}
	for _, p := range []struct {
		name string
		v    int32
	}{{"proxy", o.ProxyPort}, {"sni", o.SNIPort}, {"http", o.HTTPPort}, {"dns", o.DNSPort}, {"metrics", o.MetricsPort}, {"apiserver", o.APIServerPort}, {"webhook", o.WebhookPort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("%s port %d: out of range 1-65535", p.name, p.v))
		}
	}
	if o.NodeLocalDNS.IsValid() {
		if overlapsNever(netip.PrefixFrom(o.NodeLocalDNS, o.NodeLocalDNS.BitLen())) || o.NodeLocalDNS.IsUnspecified() {
			errs = append(errs, fmt.Errorf("nodelocal DNS %s: link-local or metadata address; an ipBlock must never include one (use the kube-dns service address NodeLocal DNSCache also binds)", o.NodeLocalDNS))
		}
	}
	for _, p := range o.APIServer {
		if !p.IsValid() || p.Bits() == 0 || overlapsNever(p) {
			errs = append(errs, fmt.Errorf("API server %s: must be a non-default range outside link-local and metadata addresses", p))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
	}
	return nil
}

func overlapsNever(p netip.Prefix) bool {
	for _, n := range policy.NeverPrefixes() {
		if n.Overlaps(p) {
			return true
		}
	}
	return false
}

// NetworkPolicies returns the NetworkPolicies that make egressd the only way
// out of the namespace (docs/design.md "NetworkPolicy"), with apiVersion and kind
// set, in a stable order:
//
//   - egressd-workloads: the workload pods may egress only to the egressd pods
//     on the proxy, SNI and HTTP ports (TCP) and the DNS port (UDP and TCP).
//   - egressd: the egressd pods accept ingress only from pods of their own
//     namespace on the serving ports (and metrics from MetricsNamespace);
//     they egress to 0.0.0.0/0 and ::/0 with every never range excepted,
//     to the cluster DNS on 53 and to the API server.
//
// Options are not checked here: callers run Validate first. Invalid options
// never widen an ipBlock: an unsafe NodeLocalDNS or APIServer entry is left out.
func NetworkPolicies(opts Options) []networkingv1.NetworkPolicy {
	o := opts.withDefaults()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "egressd",
			"app.kubernetes.io/part-of":    "egressd",
		}}
	}
	typeMeta := metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
	egressd := metav1.LabelSelector{MatchLabels: copyLabels(o.EgressdSelector)}

	serving := []networkingv1.NetworkPolicyPort{
		port(corev1.ProtocolTCP, o.ProxyPort),
		port(corev1.ProtocolTCP, o.SNIPort),
		port(corev1.ProtocolTCP, o.HTTPPort),
		port(corev1.ProtocolUDP, o.DNSPort),
		port(corev1.ProtocolTCP, o.DNSPort),
	}
	var workloadSel metav1.LabelSelector
	if o.WorkloadSelector != nil {
		workloadSel = *o.WorkloadSelector.DeepCopy()
	}
	workloads := networkingv1.NetworkPolicy{
		TypeMeta:   typeMeta,
		ObjectMeta: meta(WorkloadsName),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: workloadSel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: egressd.DeepCopy()}},
				Ports: serving,
			}},
		},
	}

	dns53 := []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53)}
	egress := []networkingv1.NetworkPolicyEgressRule{{
		To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: exceptNever(netip.MustParsePrefix("0.0.0.0/0"))},
			{IPBlock: exceptNever(netip.MustParsePrefix("::/0"))},
		},
	}}
	if !o.NoKubeDNS {
		// One peer with both selectors: pods matching podSelector in
		// namespaces matching namespaceSelector (two peers would be a union).
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: o.KubeDNSNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: copyLabels(o.KubeDNSSelector)},
			}},
			Ports: dns53,
		})
	}
	if a := o.NodeLocalDNS; a.IsValid() && !a.IsUnspecified() && !overlapsNever(netip.PrefixFrom(a, a.BitLen())) {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()}}},
			Ports: dns53,
		})
	}
	var api []networkingv1.NetworkPolicyPeer
	for _, p := range o.APIServer {
		if p.IsValid() && p.Bits() > 0 && !overlapsNever(p) {
			api = append(api, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: p.Masked().String()}})
		}
	}
	if len(api) > 0 {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To: api, Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, o.APIServerPort)},
		})
	}

	// Ingress: a peer with only a podSelector means pods of the policy's own
	// namespace.
	ingress := []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
		Ports: serving,
	}}
	metricsFrom := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
	if o.MetricsNamespace != "" {
		metricsFrom = networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{NamespaceNameLabel: o.MetricsNamespace},
		}}
	}
	ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
		From:  []networkingv1.NetworkPolicyPeer{metricsFrom},
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, o.MetricsPort)},
	})
	if o.WebhookPort != 0 {
		// Admission reviews over TLS; the webhook can only add proxy settings.
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, o.WebhookPort)},
		})
	}
	self := networkingv1.NetworkPolicy{
		TypeMeta:   typeMeta,
		ObjectMeta: meta(EgressdName),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: egressd,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}
	return []networkingv1.NetworkPolicy{workloads, self}
}

// exceptNever returns an ipBlock for p with every never range inside p
// excepted. The API server requires each except to lie inside the cidr, so
// only the ranges of p's family (and inside p) are listed.
func exceptNever(p netip.Prefix) *networkingv1.IPBlock {
	b := &networkingv1.IPBlock{CIDR: p.String()}
	for _, n := range policy.NeverPrefixes() {
		if n.Addr().Is4() == p.Addr().Is4() && p.Bits() <= n.Bits() && p.Contains(n.Addr()) {
			b.Except = append(b.Except, n.String())
		}
	}
	return b
}

func port(proto corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(p)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func copyLabels(m map[string]string) map[string]string { return maps.Clone(m) }
