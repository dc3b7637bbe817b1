package netpol

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/policy"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// neverProbes are addresses of docs/design.md's never class that no emitted
// ipBlock may include, in plain and embedded forms.
var neverProbes = []string{
	"169.254.169.254", "169.254.170.2", "169.254.170.23", "169.254.0.1", "169.254.255.255",
	"168.63.129.16", "100.100.100.200",
	"fe80::1", "febf:ffff::1", "fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254",
	"64:ff9b::169.254.169.254", "64:ff9b::168.63.129.16", "64:ff9b::100.100.100.200",
	"2002:a9fe:a9fe::1",
}

func allIPBlocks(nps []networkingv1.NetworkPolicy) []*networkingv1.IPBlock {
	var out []*networkingv1.IPBlock
	for _, np := range nps {
		for _, r := range np.Spec.Egress {
			for _, p := range r.To {
				if p.IPBlock != nil {
					out = append(out, p.IPBlock)
				}
			}
		}
		for _, r := range np.Spec.Ingress {
			for _, p := range r.From {
				if p.IPBlock != nil {
					out = append(out, p.IPBlock)
				}
			}
		}
	}
	return out
}

func blockAllows(t *testing.T, b *networkingv1.IPBlock, a netip.Addr) bool {
	t.Helper()
	p := netip.MustParsePrefix(b.CIDR)
	if !p.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if netip.MustParsePrefix(e).Contains(a) {
			return false
		}
	}
	return true
}

func TestNetworkPoliciesNeverOpenNeverClass(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"defaults", Options{Namespace: "llm"}},
		{"nodelocal and apiserver", Options{Namespace: "llm",
			NodeLocalDNS: netip.MustParseAddr("10.96.0.10"),
			APIServer:    []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("2001:db8::1/128")}}},
		{"unsafe entries are left out", Options{Namespace: "llm",
			NodeLocalDNS: netip.MustParseAddr("169.254.20.10"),
			APIServer:    []netip.Prefix{netip.MustParsePrefix("169.254.0.0/15"), netip.MustParsePrefix("0.0.0.0/0")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocks := allIPBlocks(NetworkPolicies(tc.opts))
			if len(blocks) < 2 {
				t.Fatalf("want at least the 0.0.0.0/0 and ::/0 blocks, got %d", len(blocks))
			}
			for _, b := range blocks {
				p := netip.MustParsePrefix(b.CIDR)
				for _, e := range b.Except {
					ep := netip.MustParsePrefix(e)
					// The API server requires every except strictly inside the cidr.
					if ep.Addr().Is4() != p.Addr().Is4() || ep.Bits() <= p.Bits() || !p.Contains(ep.Addr()) {
						t.Errorf("ipBlock %s: except %s is not inside it", b.CIDR, e)
					}
				}
				for _, s := range neverProbes {
					if a := netip.MustParseAddr(s); blockAllows(t, b, a) {
						t.Errorf("ipBlock %s except %v reaches never-class address %s", b.CIDR, b.Except, s)
					}
				}
			}
		})
	}
}

// TestNeverPrefixesAgreeWithGuard holds the excepted ranges to the guard:
// every probe the guard calls never is excepted. (Addresses that the guard
// classifies by their embedded IPv4 part are in neverProbes too.)
func TestNeverPrefixesAgreeWithGuard(t *testing.T) {
	for _, s := range neverProbes {
		a := netip.MustParseAddr(s)
		if !a.Is4() && !a.Is6() {
			continue
		}
		t.Run(s, func(t *testing.T) {
			if c, _ := policy.Classify(a); c != policy.ClassNever {
				t.Skipf("guard classifies %s as %v, not never", s, c)
			}
			in := false
			for _, p := range policy.NeverPrefixes() {
				in = in || p.Contains(a)
			}
			if !in {
				t.Errorf("%s is never-class for the guard but not excepted by NeverPrefixes", s)
			}
		})
	}
}

func TestNetworkPoliciesShape(t *testing.T) {
	nps := NetworkPolicies(Options{Namespace: "llm", MetricsNamespace: "monitoring"})
	if len(nps) != 2 {
		t.Fatalf("got %d policies, want 2", len(nps))
	}
	w, e := nps[0], nps[1]
	t.Run("typemeta", func(t *testing.T) {
		for _, np := range nps {
			if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" || np.Namespace != "llm" {
				t.Errorf("%s: apiVersion %q kind %q namespace %q", np.Name, np.APIVersion, np.Kind, np.Namespace)
			}
		}
	})
	t.Run("workloads select every pod but egressd", func(t *testing.T) {
		want := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: NameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"egressd"}}}}
		if got := metav1.FormatLabelSelector(&w.Spec.PodSelector); got != metav1.FormatLabelSelector(&want) {
			t.Errorf("workload selector %s", got)
		}
		if len(w.Spec.Egress) != 1 || len(w.Spec.Egress[0].To) != 1 || w.Spec.Egress[0].To[0].PodSelector == nil ||
			w.Spec.Egress[0].To[0].PodSelector.MatchLabels[NameLabel] != "egressd" || w.Spec.Egress[0].To[0].NamespaceSelector != nil {
			t.Fatalf("workload egress %+v", w.Spec.Egress)
		}
		got := map[string]bool{}
		for _, p := range w.Spec.Egress[0].Ports {
			got[p.Port.String()+"/"+string(*p.Protocol)] = true
		}
		for _, want := range []string{"3128/TCP", "8443/TCP", "8080/TCP", "5353/UDP", "5353/TCP"} {
			if !got[want] {
				t.Errorf("workload egress lacks %s (has %v)", want, got)
			}
		}
		if len(got) != 5 {
			t.Errorf("workload egress ports %v, want exactly 5", got)
		}
	})
	t.Run("kube-dns peer is one peer with both selectors", func(t *testing.T) {
		found := false
		for _, r := range e.Spec.Egress {
			for _, p := range r.To {
				if p.NamespaceSelector != nil {
					found = true
					if p.PodSelector == nil || p.PodSelector.MatchLabels["k8s-app"] != "kube-dns" ||
						p.NamespaceSelector.MatchLabels[NamespaceNameLabel] != "kube-system" {
						t.Errorf("kube-dns peer %+v", p)
					}
					if len(r.Ports) != 2 || r.Ports[0].Port.IntValue() != 53 || r.Ports[1].Port.IntValue() != 53 {
						t.Errorf("kube-dns ports %+v", r.Ports)
					}
				}
			}
		}
		if !found {
			t.Error("no kube-dns peer")
		}
	})
	t.Run("metrics from the configured namespace", func(t *testing.T) {
		last := e.Spec.Ingress[len(e.Spec.Ingress)-1]
		if last.Ports[0].Port.IntValue() != DefaultMetricsPort || last.From[0].NamespaceSelector.MatchLabels[NamespaceNameLabel] != "monitoring" {
			t.Errorf("metrics ingress %+v", last)
		}
	})
	t.Run("ingress of the serving ports only from the own namespace", func(t *testing.T) {
		in := e.Spec.Ingress[0]
		if len(in.From) != 1 || in.From[0].NamespaceSelector != nil || in.From[0].IPBlock != nil {
			t.Errorf("ingress %+v", in)
		}
	})
}

func TestNetpolOptionsValidate(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string // substring of the error; empty: valid
	}{
		{"defaults", Options{Namespace: "a"}, ""},
		{"no namespace", Options{}, "namespace is required"},
		{"link-local nodelocal", Options{Namespace: "a", NodeLocalDNS: netip.MustParseAddr("169.254.20.10")}, "nodelocal"},
		{"metadata apiserver", Options{Namespace: "a", APIServer: []netip.Prefix{netip.MustParsePrefix("168.63.129.16/32")}}, "API server"},
		{"apiserver everything", Options{Namespace: "a", APIServer: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, "API server"},
		{"several egressd labels need a workload selector", Options{Namespace: "a", EgressdSelector: map[string]string{"a": "1", "b": "2"}}, "workload selector"},
		{"several egressd labels with workload selector", Options{Namespace: "a", EgressdSelector: map[string]string{"a": "1", "b": "2"},
			WorkloadSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "app"}}}, ""},
		{"port out of range", Options{Namespace: "a", ProxyPort: 70000}, "proxy port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrOptions)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckNetworkPolicies(t *testing.T) {
	opts := Options{Namespace: "llm"}
	generated := NetworkPolicies(opts)
	tcp := corev1.ProtocolTCP
	np := func(name string, sel metav1.LabelSelector, rules ...networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: rules}}
	}
	ipRule := func(cidr string, except ...string) networkingv1.NetworkPolicyEgressRule {
		return networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}}
	}
	app := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	egressdOnly := metav1.LabelSelector{MatchLabels: map[string]string{NameLabel: "egressd"}}
	cases := []struct {
		name string
		nps  []networkingv1.NetworkPolicy
		want []string // substrings, one per expected finding, in order
	}{
		{"generated set is clean", generated, nil},
		{"nothing at all", nil, []string{"no egress NetworkPolicy selects every workload pod"}},
		{"allow-all adds up with the generated set", append(generated[:2:2], np("allow-all", metav1.LabelSelector{}, networkingv1.NetworkPolicyEgressRule{})),
			[]string{"llm/allow-all egress[0]: no peers: every destination on every port, 0.0.0.0/0"}},
		{"0.0.0.0/0 for one app", append(generated[:2:2], np("web-out", app, ipRule("0.0.0.0/0"))),
			[]string{"llm/web-out egress[0].to[0]: ipBlock 0.0.0.0/0 (every address) reaches 169.254.169.254 (cloud metadata)"}},
		{"metadata /32", append(generated[:2:2], np("meta", app, ipRule("169.254.169.254/32"))),
			[]string{"ipBlock 169.254.169.254/32 reaches 169.254.169.254"}},
		{"excepted block still a bypass but no metadata", append(generated[:2:2], np("pub", app, ipRule("0.0.0.0/0", "169.254.0.0/16", "168.63.129.16/32", "100.100.100.200/32"))),
			[]string{"ipBlock 0.0.0.0/0 (every address) on every port"}},
		{"policy selecting egressd only is ignored", append(generated[:2:2], np("egressd-extra", egressdOnly, ipRule("0.0.0.0/0"))), nil},
		{"ingress-only policy is ignored", append(generated[:2:2], networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "in", Namespace: "llm"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}), nil},
		{"other namespaces' policies are ignored", []networkingv1.NetworkPolicy{generated[0], generated[1], {ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "other"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, Egress: []networkingv1.NetworkPolicyEgressRule{{}}}}}, nil},
		{"other pods of the namespace", append(generated[:2:2], np("to-db", app, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptrIntstr(5432)}}})),
			[]string{"to-db egress[0].to[0]: pods of the namespace matching {app=db} (not egressd): they may forward traffic out on 5432/TCP"}},
		{"every namespace", append(generated[:2:2], np("any-ns", app, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}})),
			[]string{"any-ns egress[0].to[0]: pods matching {} (all) in namespaces matching {} (all)"}},
		{"kube-dns on 53 is fine", append(generated[:2:2], np("dns", app, generated[1].Spec.Egress[1])), nil},
		{"only one app restricted", []networkingv1.NetworkPolicy{np("web", app, generated[0].Spec.Egress[0])},
			[]string{"no egress NetworkPolicy selects every workload pod"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(opts, tc.nps)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d findings %v, want %d %q", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("finding %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func ptrIntstr(p int32) *intstr.IntOrString { v := intstr.FromInt32(p); return &v }

// FuzzCheckNetworkPolicies feeds arbitrary ipBlock strings (from objects in
// the API, which egressd netpol --check reads) to the check: it must never
// panic, and must flag every ipBlock of a workload policy.
func FuzzCheckNetworkPolicies(f *testing.F) {
	for _, s := range [][2]string{
		{"0.0.0.0/0", "169.254.0.0/16"}, {"169.254.169.254/32", ""}, {"::/0", "fe80::/10"},
		{"10.0.0.0/8", "10.1.0.0/16"}, {"not a cidr", "x"}, {"", ""}, {"1.2.3.4/33", "::/129"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, cidr, except string) {
		np := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: []string{except}}}}}}}}
		got := Check(Options{Namespace: "ns"}, []networkingv1.NetworkPolicy{np})
		if len(got) != 1 || got[0].Policy != "ns/f" || !strings.Contains(got[0].Message, "ipBlock") {
			t.Fatalf("ipBlock %q except %q not flagged: %v", cidr, except, got)
		}
	})
}

// TestNetworkPoliciesWebhookPort: the webhook's port is open to any
// source (the API server), and only with WebhookPort set.
func TestNetworkPoliciesWebhookPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		port int32
		want int
	}{{"no webhook", 0, 2}, {"webhook", 9443, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			nps := NetworkPolicies(Options{Namespace: "ns", WebhookPort: tc.port})
			in := nps[1].Spec.Ingress
			if len(in) != tc.want {
				t.Fatalf("%d ingress rules, want %d", len(in), tc.want)
			}
			if tc.port != 0 && (len(in[2].From) != 0 || in[2].Ports[0].Port.IntVal != tc.port) {
				t.Errorf("webhook rule %+v", in[2])
			}
		})
	}
}
