package chart_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/netpol"
)

// TestNetworkPoliciesEqualNetpol holds the chart to one source of truth: for
// the same settings, the rendered NetworkPolicies equal netpol.NetworkPolicies,
// the generator behind `egressd netpol`: same names, selectors, ports,
// ipBlocks and excepts. Labels differ by design (Helm's vs egressd's
// managed-by) and are not compared; list order is not semantic and is
// normalized.
func TestNetworkPoliciesEqualNetpol(t *testing.T) {
	const ns = "llm-prod"
	cases := []struct {
		name  string
		files []string
		sets  []string
		opts  netpol.Options
	}{
		{name: "defaults, turned on", sets: []string{"networkPolicy.enabled=true"}, opts: netpol.Options{Namespace: ns}},
		{
			name: "all-on", files: []string{allOnValues(t)},
			opts: netpol.Options{
				Namespace:        ns,
				WorkloadSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"egress.example.com/confined": "true"}},
				KubeDNSNamespace: "dns-system",
				KubeDNSSelector:  map[string]string{"app.kubernetes.io/name": "coredns"},
				NodeLocalDNS:     netip.MustParseAddr("10.96.0.10"),
				APIServer:        []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("10.0.0.2/32")},
				APIServerPort:    6443,
				MetricsNamespace: "monitoring",
				WebhookPort:      9443,
			},
		},
		{
			name: "no kube-dns, IPv6 node-local, expression workload selector",
			sets: []string{
				"networkPolicy.enabled=true",
				"networkPolicy.kubeDNS.enabled=false",
				"networkPolicy.nodeLocalDNS=fd00:10:96::a",
				"networkPolicy.workloadSelector.matchExpressions[0].key=tier",
				"networkPolicy.workloadSelector.matchExpressions[0].operator=In",
				"networkPolicy.workloadSelector.matchExpressions[0].values[0]=batch",
			},
			opts: netpol.Options{
				Namespace: ns, NoKubeDNS: true,
				NodeLocalDNS: netip.MustParseAddr("fd00:10:96::a"),
				WorkloadSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"batch"}},
				}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.opts.Validate(); err != nil {
				t.Fatalf("the case's own options are invalid: %v", err)
			}
			want := map[string][]byte{}
			for _, np := range netpol.NetworkPolicies(c.opts) {
				want[np.Name] = canonNetpol(t, np)
			}
			got := map[string][]byte{}
			for _, u := range ofKind(render(t, ns, c.files, c.sets...), "NetworkPolicy") {
				got[u.GetName()] = canonNetpol(t, *fromUnstructured[networkingv1.NetworkPolicy](t, u))
			}
			for name, w := range want {
				g, ok := got[name]
				if !ok {
					t.Errorf("chart renders no NetworkPolicy %q that egressd netpol emits", name)
					continue
				}
				if !bytes.Equal(g, w) {
					t.Errorf("NetworkPolicy %q differs\nchart:  %s\nnetpol: %s", name, g, w)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("chart renders NetworkPolicy %q that egressd netpol does not emit", name)
				}
			}
		})
	}
}

// TestNetworkPolicyToggle: off renders none; unsafe addresses that
// netpol.Options.Validate refuses fail the render too.
func TestNetworkPolicyToggle(t *testing.T) {
	if got := ofKind(render(t, "llm-prod", nil, "networkPolicy.enabled=false"), "NetworkPolicy"); len(got) != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies", len(got))
	}
	for _, c := range []struct {
		name string
		set  string
		opts netpol.Options
		want string // substring of the render error
	}{
		{"node-local link-local default", "networkPolicy.nodeLocalDNS=169.254.20.10",
			netpol.Options{Namespace: "x", NodeLocalDNS: netip.MustParseAddr("169.254.20.10")}, "no ipBlock may include"},
		{"api server on metadata", "networkPolicy.apiServer.cidrs[0]=169.254.169.254/32",
			netpol.Options{Namespace: "x", APIServer: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}, "no ipBlock may include"},
		{"api server default route", "networkPolicy.apiServer.cidrs[0]=0.0.0.0/0",
			netpol.Options{Namespace: "x", APIServer: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, "no ipBlock may include"},
		{"api server Azure WireServer", "networkPolicy.apiServer.cidrs[0]=168.63.129.16/32",
			netpol.Options{Namespace: "x", APIServer: []netip.Prefix{netip.MustParsePrefix("168.63.129.16/32")}}, "no ipBlock may include"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.opts.Validate() == nil {
				t.Fatal("netpol.Options.Validate accepts it; the chart must not be stricter than netpol")
			}
			out, err := renderErr(t, "llm-prod", nil, c.set, "networkPolicy.enabled=true")
			if err == nil {
				t.Fatalf("rendered:\n%s", out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not mention %q: %v", c.want, err)
			}
		})
	}
}

// canonNetpol returns the semantic content of a NetworkPolicy as JSON: name,
// namespace and spec, with the protocol default (TCP) made explicit and every
// list (all are sets in NetworkPolicy semantics) sorted.
func canonNetpol(t testing.TB, np networkingv1.NetworkPolicy) []byte {
	t.Helper()
	for i := range np.Spec.Ingress {
		defaultProto(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultProto(np.Spec.Egress[i].Ports)
	}
	b, err := json.Marshal(map[string]any{"name": np.Name, "namespace": np.Namespace, "spec": np.Spec})
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(sortLists(v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func defaultProto(ports []networkingv1.NetworkPolicyPort) {
	for i := range ports {
		if ports[i].Protocol == nil {
			tcp := corev1.ProtocolTCP
			ports[i].Protocol = &tcp
		}
	}
}

// sortLists sorts every JSON array by the canonical encoding of its items,
// depth first; encoding/json writes map keys sorted, so equal values encode
// equally.
func sortLists(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = sortLists(e)
		}
		return x
	case []any:
		type item struct {
			key string
			v   any
		}
		items := make([]item, len(x))
		for i, e := range x {
			e = sortLists(e)
			b, _ := json.Marshal(e)
			items[i] = item{string(b), e}
		}
		slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.key, b.key) })
		for i := range items {
			x[i] = items[i].v
		}
		return x
	}
	return v
}
