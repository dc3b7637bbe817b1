package kube_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/netpol"
)

// TestNetworkPoliciesOracle applies the emitted NetworkPolicies to the real
// API server (its validation must pass; applying twice is a no-op), reads
// them back, and evaluates the stored objects with cyclonus, an independent
// implementation of NetworkPolicy semantics.
func TestNetworkPoliciesOracle(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	opts := netpol.Options{
		Namespace:        ns,
		MetricsNamespace: "monitoring",
		NodeLocalDNS:     netip.MustParseAddr("10.96.0.10"),
		APIServer:        []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	nps := netpol.NetworkPolicies(opts)
	first, err := kube.ApplyNetworkPolicies(ctx, lean(t, env), nps)
	if err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	again, err := kube.ApplyNetworkPolicies(ctx, lean(t, env), nps)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	for i := range first {
		if first[i].ResourceVersion != again[i].ResourceVersion {
			t.Errorf("%s: re-applying the same policy changed it", first[i].Name)
		}
		if mf := first[i].ManagedFields; len(mf) == 0 || mf[0].Manager != kube.FieldManager || mf[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("%s: managed fields %+v, want an Apply by %q", first[i].Name, mf, kube.FieldManager)
		}
	}
	stored, err := env.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Items) != 2 {
		t.Fatalf("stored %d policies, want 2", len(stored.Items))
	}
	ptrs := make([]*networkingv1.NetworkPolicy, len(stored.Items))
	for i := range stored.Items {
		ptrs[i] = &stored.Items[i]
	}
	oracle := matcher.BuildNetworkPolicies(true, ptrs)

	nsLabels := map[string]string{netpol.NamespaceNameLabel: ns}
	pod := func(labels map[string]string, ip string) *matcher.TrafficPeer {
		return &matcher.TrafficPeer{IP: ip, Internal: &matcher.InternalPeer{Namespace: ns, NamespaceLabels: nsLabels, PodLabels: labels}}
	}
	// Workloads carry the recommended name label with another value. (For a
	// pod without that key, cyclonus v0.5.6 evaluates NotIn as no match, unlike
	// Kubernetes' own selector semantics, where NotIn matches a missing key;
	// the real semantics are asserted below with apimachinery's selector.)
	workload := pod(map[string]string{netpol.NameLabel: "llm-server", "app": "llm-server"}, "10.244.0.7")
	egressd := pod(map[string]string{netpol.NameLabel: "egressd"}, "10.244.0.2")
	kubeDNS := &matcher.TrafficPeer{IP: "10.244.9.9", Internal: &matcher.InternalPeer{Namespace: "kube-system",
		NamespaceLabels: map[string]string{netpol.NamespaceNameLabel: "kube-system"}, PodLabels: map[string]string{"k8s-app": "kube-dns"}}}
	otherNS := &matcher.TrafficPeer{IP: "10.244.5.5", Internal: &matcher.InternalPeer{Namespace: "other",
		NamespaceLabels: map[string]string{netpol.NamespaceNameLabel: "other"}, PodLabels: map[string]string{"app": "x"}}}
	prometheus := &matcher.TrafficPeer{IP: "10.244.6.6", Internal: &matcher.InternalPeer{Namespace: "monitoring",
		NamespaceLabels: map[string]string{netpol.NamespaceNameLabel: "monitoring"}, PodLabels: map[string]string{"app": "prometheus"}}}
	ext := func(ip string) *matcher.TrafficPeer { return &matcher.TrafficPeer{IP: ip} }

	cases := []struct {
		name     string
		src, dst *matcher.TrafficPeer
		port     int
		proto    corev1.Protocol
		want     bool
	}{
		{"workload to egressd proxy", workload, egressd, 3128, corev1.ProtocolTCP, true},
		{"workload to egressd SNI", workload, egressd, 8443, corev1.ProtocolTCP, true},
		{"workload to egressd HTTP", workload, egressd, 8080, corev1.ProtocolTCP, true},
		{"workload to egressd DNS UDP", workload, egressd, 5353, corev1.ProtocolUDP, true},
		{"workload to egressd DNS TCP", workload, egressd, 5353, corev1.ProtocolTCP, true},
		{"workload to egressd metrics", workload, egressd, 9090, corev1.ProtocolTCP, false},
		{"workload to egressd other port", workload, egressd, 22, corev1.ProtocolTCP, false},
		{"workload to metadata", workload, ext("169.254.169.254"), 80, corev1.ProtocolTCP, false},
		{"workload to public IP", workload, ext("203.0.113.10"), 443, corev1.ProtocolTCP, false},
		{"workload to public IPv6", workload, ext("2001:db8::10"), 443, corev1.ProtocolTCP, false},
		{"workload to kube-dns", workload, kubeDNS, 53, corev1.ProtocolUDP, false},
		{"workload to another workload", workload, pod(map[string]string{netpol.NameLabel: "db"}, "10.244.0.8"), 5432, corev1.ProtocolTCP, false},
		{"egressd to metadata", egressd, ext("169.254.169.254"), 80, corev1.ProtocolTCP, false},
		{"egressd to ECS metadata", egressd, ext("169.254.170.2"), 80, corev1.ProtocolTCP, false},
		{"egressd to Azure WireServer", egressd, ext("168.63.129.16"), 80, corev1.ProtocolTCP, false},
		{"egressd to Alibaba metadata", egressd, ext("100.100.100.200"), 80, corev1.ProtocolTCP, false},
		{"egressd to AWS IPv6 metadata", egressd, ext("fd00:ec2::254"), 80, corev1.ProtocolTCP, false},
		{"egressd to IPv6 link-local", egressd, ext("fe80::1"), 443, corev1.ProtocolTCP, false},
		{"egressd to metadata via NAT64", egressd, ext("64:ff9b::a9fe:a9fe"), 80, corev1.ProtocolTCP, false},
		{"egressd to public IP 443", egressd, ext("203.0.113.10"), 443, corev1.ProtocolTCP, true},
		{"egressd to public IPv6 443", egressd, ext("2001:db8::10"), 443, corev1.ProtocolTCP, true},
		{"egressd to kube-dns UDP", egressd, kubeDNS, 53, corev1.ProtocolUDP, true},
		{"egressd to kube-dns TCP", egressd, kubeDNS, 53, corev1.ProtocolTCP, true},
		{"egressd to nodelocal DNS", egressd, ext("10.96.0.10"), 53, corev1.ProtocolUDP, true},
		{"egressd to API server", egressd, ext("10.0.0.1"), 443, corev1.ProtocolTCP, true},
		{"other namespace to egressd proxy", otherNS, egressd, 3128, corev1.ProtocolTCP, false},
		{"other namespace to egressd metrics", otherNS, egressd, 9090, corev1.ProtocolTCP, false},
		{"metrics namespace to egressd metrics", prometheus, egressd, 9090, corev1.ProtocolTCP, true},
		{"metrics namespace to egressd proxy", prometheus, egressd, 3128, corev1.ProtocolTCP, false},
	}
	t.Run("workload selector by Kubernetes semantics", func(t *testing.T) {
		var sel metav1.LabelSelector
		for _, np := range stored.Items {
			if np.Name == netpol.WorkloadsName {
				sel = np.Spec.PodSelector
			}
		}
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			labels map[string]string
			want   bool
		}{{nil, true}, {map[string]string{"app": "x"}, true}, {map[string]string{netpol.NameLabel: "llm-server"}, true},
			{map[string]string{netpol.NameLabel: "egressd"}, false}} {
			if got := s.Matches(labels.Set(c.labels)); got != c.want {
				t.Errorf("pod labels %v selected = %v, want %v", c.labels, got, c.want)
			}
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := oracle.IsTrafficAllowed(&matcher.Traffic{Source: tc.src, Destination: tc.dst, ResolvedPort: tc.port, Protocol: tc.proto})
			if r.IsAllowed() != tc.want {
				t.Errorf("allowed = %v, want %v\n%s", r.IsAllowed(), tc.want, r.Table())
			}
		})
	}
}

// TestCheckNamespace: the emitted set passes --check; one broad policy added
// next to it is flagged by name and rule, metadata named.
func TestCheckNamespace(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	opts := netpol.Options{Namespace: ns}

	found, err := kube.CheckNamespace(ctx, lean(t, env), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.Contains(found[0].String(), "no egress NetworkPolicy selects every workload pod") {
		t.Fatalf("empty namespace: %v", found)
	}
	if _, err := kube.ApplyNetworkPolicies(ctx, lean(t, env), netpol.NetworkPolicies(opts)); err != nil {
		t.Fatal(err)
	}
	if found, err = kube.CheckNamespace(ctx, lean(t, env), opts); err != nil || len(found) != 0 {
		t.Fatalf("emitted set: %v %v", found, err)
	}
	broad := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-web-out"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{netpol.NameLabel: "egressd"}}}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}},
			},
		},
	}
	if _, err := env.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, broad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	found, err = kube.CheckNamespace(ctx, lean(t, env), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "NetworkPolicy " + ns + "/allow-web-out egress[1].to[0]: ipBlock 0.0.0.0/0 (every address) reaches 169.254.169.254"
	if len(found) != 1 || !strings.HasPrefix(found[0].String(), want) {
		t.Fatalf("findings %v, want one starting %q", found, want)
	}
}
