package netpol

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bypass is one path out of the namespace that does not go through egressd,
// found by Check.
type Bypass struct {
	// Policy is "namespace/name" of the NetworkPolicy that opens the path;
	// empty when the path exists because no policy closes it.
	Policy string
	// Rule is the index in spec.egress, Peer the index in that rule's to;
	// -1 when not applicable (no peers: every destination).
	Rule, Peer int
	// Message says what is reachable, naming 0.0.0.0/0 and metadata
	// addresses where they are.
	Message string
}

func (b Bypass) String() string {
	switch {
	case b.Policy == "":
		return b.Message
	case b.Peer < 0:
		return fmt.Sprintf("NetworkPolicy %s egress[%d]: %s", b.Policy, b.Rule, b.Message)
	default:
		return fmt.Sprintf("NetworkPolicy %s egress[%d].to[%d]: %s", b.Policy, b.Rule, b.Peer, b.Message)
	}
}

// probeAddrs are named in messages when an ipBlock reaches them.
var probeAddrs = []struct {
	addr netip.Addr
	what string
}{
	{netip.MustParseAddr("169.254.169.254"), "cloud metadata"},
	{netip.MustParseAddr("169.254.170.2"), "ECS task metadata"},
	{netip.MustParseAddr("168.63.129.16"), "Azure WireServer"},
	{netip.MustParseAddr("100.100.100.200"), "Alibaba metadata"},
	{netip.MustParseAddr("fd00:ec2::254"), "AWS IPv6 metadata"},
}

// Check reports every egress path of the workload pods
// (opts.WorkloadSelector, default every pod but egressd) that bypasses
// egressd, given the NetworkPolicies of opts.Namespace. NetworkPolicies add
// up (a connection is allowed when any policy selecting the pod allows it),
// so one broad rule opens what every other policy closes: each rule of each
// egress policy that can select a workload pod is examined on its own.
//
// Allowed peers are the egressd pods (any port: only egressd listens there)
// and the cluster DNS pods (opts.KubeDNS*) on port 53. Everything else is a
// bypass: any ipBlock, a rule without peers, other pods or namespaces. The
// analysis is by selector, not by pod: a policy whose podSelector requires
// the egressd labels selects no workload; any other may.
func Check(opts Options, nps []networkingv1.NetworkPolicy) []Bypass {
	o := opts.withDefaults()
	var out []Bypass
	covered := false
	for _, np := range nps {
		if o.Namespace != "" && np.Namespace != "" && np.Namespace != o.Namespace {
			continue
		}
		if !hasEgress(np) || requires(np.Spec.PodSelector, o.EgressdSelector) {
			continue
		}
		if coversWorkloads(np.Spec.PodSelector, o) {
			covered = true
		}
		name := np.Namespace + "/" + np.Name
		for i, r := range np.Spec.Egress {
			ports := describePorts(r.Ports)
			if len(r.To) == 0 {
				out = append(out, Bypass{Policy: name, Rule: i, Peer: -1,
					Message: "no peers: every destination " + ports + ", 0.0.0.0/0, ::/0 and 169.254.169.254 (cloud metadata) included"})
				continue
			}
			for j, p := range r.To {
				if msg := checkPeer(p, r.Ports, o); msg != "" {
					out = append(out, Bypass{Policy: name, Rule: i, Peer: j, Message: msg + " " + ports})
				}
			}
		}
	}
	if !covered {
		out = append([]Bypass{{Rule: -1, Peer: -1, Message: fmt.Sprintf(
			"namespace %s: no egress NetworkPolicy selects every workload pod; a pod no egress policy selects reaches every destination, 169.254.169.254 included (egressd netpol --apply closes it)",
			o.Namespace)}}, out...)
	}
	return out
}

func checkPeer(p networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, o Options) string {
	if p.IPBlock != nil {
		return describeIPBlock(p.IPBlock)
	}
	if p.NamespaceSelector == nil {
		// Pods of the policy's own namespace.
		if p.PodSelector != nil && requires(*p.PodSelector, o.EgressdSelector) {
			return ""
		}
		return "pods of the namespace matching " + describeSelector(p.PodSelector) + " (not egressd): they may forward traffic out"
	}
	egressdNS := requires(*p.NamespaceSelector, map[string]string{NamespaceNameLabel: o.Namespace})
	if egressdNS && p.PodSelector != nil && requires(*p.PodSelector, o.EgressdSelector) {
		return ""
	}
	dnsNS := requires(*p.NamespaceSelector, map[string]string{NamespaceNameLabel: o.KubeDNSNamespace})
	if dnsNS && p.PodSelector != nil && requires(*p.PodSelector, o.KubeDNSSelector) && onlyDNSPorts(ports) {
		return ""
	}
	return "pods matching " + describeSelector(p.PodSelector) + " in namespaces matching " + describeSelector(p.NamespaceSelector)
}

func describeIPBlock(b *networkingv1.IPBlock) string {
	p, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return fmt.Sprintf("ipBlock %q (unparsable): treated as every address", b.CIDR)
	}
	var except []netip.Prefix
	for _, e := range b.Except {
		if ep, err := netip.ParsePrefix(e); err == nil {
			except = append(except, ep)
		}
	}
	msg := "ipBlock " + b.CIDR
	if p.Bits() == 0 {
		msg += " (every address)"
	}
	var reach []string
	for _, a := range probeAddrs {
		if p.Contains(a.addr) && !slices.ContainsFunc(except, func(e netip.Prefix) bool { return e.Contains(a.addr) }) {
			reach = append(reach, fmt.Sprintf("%s (%s)", a.addr, a.what))
		}
	}
	if len(reach) > 0 {
		msg += " reaches " + strings.Join(reach, ", ")
	}
	return msg
}

// hasEgress reports whether np restricts egress: policyTypes names Egress,
// or is empty and the policy has egress rules (the API server's defaulting).
func hasEgress(np networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// requires reports whether every pod sel matches carries all labels of want:
// each is in matchLabels, or is an In requirement with exactly that value.
func requires(sel metav1.LabelSelector, want map[string]string) bool {
	for k, v := range want {
		if got, ok := sel.MatchLabels[k]; ok && got == v {
			continue
		}
		if !slices.ContainsFunc(sel.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
			return r.Key == k && r.Operator == metav1.LabelSelectorOpIn && len(r.Values) == 1 && r.Values[0] == v
		}) {
			return false
		}
	}
	return true
}

// coversWorkloads reports whether sel selects every workload pod: it is
// empty, equals the configured workload selector, or only excludes the
// egressd labels.
func coversWorkloads(sel metav1.LabelSelector, o Options) bool {
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return true
	}
	if o.WorkloadSelector != nil && reflect.DeepEqual(sel, *o.WorkloadSelector) {
		return true
	}
	if len(sel.MatchLabels) > 0 {
		return false
	}
	for _, r := range sel.MatchExpressions {
		v, isEgressdKey := o.EgressdSelector[r.Key]
		switch {
		case isEgressdKey && r.Operator == metav1.LabelSelectorOpDoesNotExist:
		case isEgressdKey && r.Operator == metav1.LabelSelectorOpNotIn && slices.Equal(r.Values, []string{v}):
		default:
			return false
		}
	}
	return true
}

func onlyDNSPorts(ports []networkingv1.NetworkPolicyPort) bool {
	if len(ports) == 0 {
		return false
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.IntValue() != 53 || p.EndPort != nil {
			return false
		}
	}
	return true
}

func describePorts(ports []networkingv1.NetworkPolicyPort) string {
	if len(ports) == 0 {
		return "on every port"
	}
	var s []string
	for _, p := range ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		switch {
		case p.Port == nil:
			s = append(s, "every "+proto+" port")
		case p.EndPort != nil:
			s = append(s, fmt.Sprintf("%s-%d/%s", p.Port.String(), *p.EndPort, proto))
		default:
			s = append(s, p.Port.String()+"/"+proto)
		}
	}
	return "on " + strings.Join(s, ", ")
}

func describeSelector(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "{} (all)"
	}
	s := metav1.FormatLabelSelector(sel)
	if s == "<none>" || s == "" {
		return "{} (all)"
	}
	return "{" + s + "}"
}
