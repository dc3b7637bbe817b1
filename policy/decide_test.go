package policy

import (
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testClient(ns string, lbls map[string]string) *Client {
	return &Client{IP: netip.MustParseAddr("10.244.0.7"), Namespace: ns, Pod: "pod-0", ServiceAccount: "default", Labels: lbls}
}

func doc(ns, name string, sel metav1.LabelSelector, sas []string, rules ...EgressRule) Document {
	return Document{
		Origin: "test.yaml: " + ns + "/" + name,
		Policy: EgressPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       EgressPolicySpec{PodSelector: sel, ServiceAccountNames: sas, Egress: rules},
		},
	}
}

func rule(ports []int32, hosts ...string) EgressRule { return EgressRule{Hosts: hosts, Ports: ports} }

func compileOne(t testing.TB, pattern string) *Snapshot {
	t.Helper()
	s, err := Compile([]Document{doc("ns", "p", metav1.LabelSelector{}, nil, rule([]int32{443}, pattern))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCompile(t testing.TB, docs ...Document) *Snapshot {
	t.Helper()
	s, err := Compile(docs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decideSnapshot is the policy set of TestDecide: two namespaces, label
// selectors of both kinds, a service account list and cidrs.
func decideSnapshot(t testing.TB) *Snapshot {
	llm := metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}
	expr := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"batch", "etl"}},
		{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	registry := rule([]int32{443}, "registry.corp.internal")
	registry.CIDRs = []string{"10.40.0.0/16", "2001:db8:40::/48"}
	registry.Purpose, registry.Owner = "images", "platform"
	// An address rule: cidrs and no hosts. Only such a rule opens IP
	// literals; registry's cidrs only widen where its name may resolve.
	addrs := EgressRule{Ports: []int32{443}, CIDRs: []string{"10.40.0.0/16", "2001:db8:40::/48"}, Purpose: "images by address"}
	models := rule([]int32{443}, "models.example.com")
	models.Purpose, models.Owner = "model weights", "ml-platform"
	return mustCompile(t,
		doc("prod", "llm", llm, nil,
			models,
			rule([]int32{443, 8443}, "**.blob.example.net"),
			registry,
			addrs,
		),
		doc("prod", "any-pod", metav1.LabelSelector{}, nil,
			rule([]int32{443}, "status.example.com"),
		),
		doc("prod", "batch", expr, []string{"etl-runner"},
			rule([]int32{5432}, "db.example.org"),
			rule([]int32{443}, "api.*.example.org"),
		),
		// An earlier policy by name that also allows models: it decides.
		doc("prod", "aaa-shared", llm, nil,
			rule([]int32{443}, "models.example.com", "*.example.com"),
		),
		doc("staging", "llm", llm, nil,
			rule([]int32{443}, "staging-models.example.com"),
		),
	)
}

func TestDecide(t *testing.T) {
	s := decideSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"})
	other := testClient("prod", map[string]string{"app": "web"})
	etl := testClient("prod", map[string]string{"tier": "etl"})
	etl.ServiceAccount = "etl-runner"
	etlWrongSA := testClient("prod", map[string]string{"tier": "etl"})
	etlCanary := testClient("prod", map[string]string{"tier": "etl", "canary": "yes"})
	etlCanary.ServiceAccount = "etl-runner"
	stagingLLM := testClient("staging", map[string]string{"app": "llm"})

	tests := []struct {
		name    string
		client  *Client
		host    string
		port    int
		reason  Reason
		policy  string
		rule    int
		purpose string
		cidrs   int
	}{
		{"unknown client", nil, "models.example.com", 443, ReasonUnknownClient, "", -1, "", 0},
		{"first policy by name decides", llm, "models.example.com", 443, ReasonAllowed, "prod/aaa-shared", 0, "", 0},
		{"wildcard of shared", llm, "x.example.com", 443, ReasonAllowed, "prod/aaa-shared", 0, "", 0},
		{"globstar one label", llm, "a.blob.example.net", 443, ReasonAllowed, "prod/llm", 1, "", 0},
		{"globstar deep", llm, "a.b.c.blob.example.net", 8443, ReasonAllowed, "prod/llm", 1, "", 0},
		{"globstar not apex", llm, "blob.example.net", 443, ReasonNotAllowlisted, "", -1, "", 0},
		{"port not allowed", llm, "a.blob.example.net", 80, ReasonPortNotAllowed, "", -1, "", 0},
		{"port zero is any", llm, "a.blob.example.net", 0, ReasonAllowed, "prod/llm", 1, "", 0},
		{"rule with cidrs", llm, "registry.corp.internal", 443, ReasonAllowed, "prod/llm", 2, "images", 2},
		{"empty selector selects all", other, "status.example.com", 443, ReasonAllowed, "prod/any-pod", 0, "", 0},
		{"selector excludes", other, "models.example.com", 443, ReasonNotAllowlisted, "", -1, "", 0},
		{"match expressions and SA", etl, "db.example.org", 5432, ReasonAllowed, "prod/batch", 0, "", 0},
		{"star in middle", etl, "api.eu.example.org", 443, ReasonAllowed, "prod/batch", 1, "", 0},
		{"SA not listed", etlWrongSA, "db.example.org", 5432, ReasonNotAllowlisted, "", -1, "", 0},
		{"DoesNotExist excludes", etlCanary, "db.example.org", 5432, ReasonNotAllowlisted, "", -1, "", 0},
		{"other namespace", stagingLLM, "models.example.com", 443, ReasonNotAllowlisted, "", -1, "", 0},
		{"own namespace", stagingLLM, "staging-models.example.com", 443, ReasonAllowed, "staging/llm", 0, "", 0},
		{"namespace without policies", testClient("dev", nil), "models.example.com", 443, ReasonNotAllowlisted, "", -1, "", 0},
		{"metadata name", llm, "metadata.google.internal", 80, ReasonMetadata, "", -1, "", 0},
		{"metadata bare", llm, "metadata", 80, ReasonMetadata, "", -1, "", 0},
		{"metadata trailing dot", llm, "instance-data.ec2.internal.", 80, ReasonMetadata, "", -1, "", 0},
		{"not normalized", llm, "Models.example.com", 443, ReasonInvalidHost, "", -1, "", 0},
		{"trailing dot", llm, "models.example.com.", 443, ReasonInvalidHost, "", -1, "", 0},
		{"empty host", llm, "", 443, ReasonInvalidHost, "", -1, "", 0},
		{"bad port", llm, "models.example.com", 70000, ReasonNotAllowlisted, "", -1, "", 0},
		{"ip in cidrs", llm, "10.40.1.2", 443, ReasonAllowed, "prod/llm", 3, "images by address", 2},
		{"ipv6 in cidrs", llm, "2001:db8:40::5", 443, ReasonAllowed, "prod/llm", 3, "images by address", 2},
		{"mapped ip in cidrs", llm, "::ffff:10.40.1.2", 443, ReasonAllowed, "prod/llm", 3, "images by address", 2},
		{"ip in cidrs wrong port", llm, "10.40.1.2", 22, ReasonPortNotAllowed, "", -1, "", 0},
		{"ip outside cidrs", llm, "10.41.1.2", 443, ReasonIPLiteral, "", -1, "", 0},
		{"public ip without cidr", llm, "8.8.8.8", 443, ReasonIPLiteral, "", -1, "", 0},
		{"ip cidrs need selection", other, "10.40.1.2", 443, ReasonIPLiteral, "", -1, "", 0},
		{"metadata ip", llm, "169.254.169.254", 80, ReasonMetadata, "", -1, "", 0},
		{"link-local ip", llm, "169.254.1.1", 80, ReasonLinkLocal, "", -1, "", 0},
		{"nat64 metadata ip", llm, "64:ff9b::a9fe:a9fe", 80, ReasonMetadata, "", -1, "", 0},
		{"ipv6 metadata ip starting with a letter", llm, "fd00:ec2::254", 80, ReasonMetadata, "", -1, "", 0},
		{"zoned link-local ipv6", llm, "fe80::1%eth0", 80, ReasonLinkLocal, "", -1, "", 0},
		{"ula ipv6 outside cidrs", llm, "fd12::1", 443, ReasonIPLiteral, "", -1, "", 0},
		{"unspecified ip", llm, "0.0.0.0", 80, ReasonReserved, "", -1, "", 0},
		{"bad ip", llm, "1.2.3", 80, ReasonInvalidHost, "", -1, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := s.Decide(DecideArgs{Client: tt.client, Host: tt.host, Port: tt.port})
			if d.Reason != tt.reason || d.Policy != tt.policy || d.Rule != tt.rule || d.Purpose != tt.purpose || len(d.CIDRs) != tt.cidrs {
				t.Fatalf("Decide(%q:%d) = %+v; want reason %s policy %q rule %d purpose %q, %d cidrs",
					tt.host, tt.port, d, tt.reason, tt.policy, tt.rule, tt.purpose, tt.cidrs)
			}
			if d.Allowed() != (tt.reason == ReasonAllowed) {
				t.Fatalf("verdict %s with reason %s", d.Verdict, d.Reason)
			}
		})
	}
}

func TestDecidePurposeOwner(t *testing.T) {
	s := decideSnapshot(t)
	d := s.Decide(DecideArgs{Client: testClient("prod", map[string]string{"app": "llm"}), Host: "registry.corp.internal", Port: 443})
	if d.Purpose != "images" || d.Owner != "platform" {
		t.Fatalf("purpose/owner = %q/%q", d.Purpose, d.Owner)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.40.0.0/16"), netip.MustParsePrefix("2001:db8:40::/48")}
	if !slices.Equal(d.CIDRs, want) {
		t.Fatalf("CIDRs = %v, want %v", d.CIDRs, want)
	}
}

func TestDecideInMode(t *testing.T) {
	s := decideSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"})
	tests := []struct {
		name      string
		args      DecideArgs
		mode      Mode
		allowed   bool
		wouldDeny bool
		reason    Reason
	}{
		{"enforce denies", DecideArgs{Client: llm, Host: "evil.example.org", Port: 443}, ModeEnforce, false, false, ReasonNotAllowlisted},
		{"audit softens", DecideArgs{Client: llm, Host: "evil.example.org", Port: 443}, ModeAudit, true, true, ReasonNotAllowlisted},
		{"audit softens port", DecideArgs{Client: llm, Host: "a.blob.example.net", Port: 80}, ModeAudit, true, true, ReasonPortNotAllowed},
		{"audit keeps allow", DecideArgs{Client: llm, Host: "models.example.com", Port: 443}, ModeAudit, true, false, ReasonAllowed},
		{"audit keeps metadata", DecideArgs{Client: llm, Host: "metadata.goog", Port: 80}, ModeAudit, false, false, ReasonMetadata},
		{"audit keeps link-local", DecideArgs{Client: llm, Host: "169.254.10.10", Port: 80}, ModeAudit, false, false, ReasonLinkLocal},
		{"audit keeps unknown client", DecideArgs{Host: "models.example.com", Port: 443}, ModeAudit, false, false, ReasonUnknownClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.args
			a.Mode = tt.mode
			d := s.Decide(a)
			if d.Allowed() != tt.allowed || d.WouldDeny != tt.wouldDeny || d.Reason != tt.reason {
				t.Fatalf("got %+v", d)
			}
		})
	}
}

func TestDecideNilAndEmptySnapshot(t *testing.T) {
	c := testClient("prod", nil)
	for name, s := range map[string]*Snapshot{"nil": nil, "zero": {}, "empty": mustCompile(t)} {
		t.Run(name, func(t *testing.T) {
			if d := s.Decide(DecideArgs{Client: c, Host: "example.com", Port: 443}); d.Allowed() || d.Reason != ReasonNotAllowlisted {
				t.Fatalf("name: %+v", d)
			}
			if d := s.Decide(DecideArgs{Client: c, Host: "10.0.0.1", Port: 443}); d.Allowed() || d.Reason != ReasonIPLiteral {
				t.Fatalf("ip: %+v", d)
			}
			if len(s.Policies()) != 0 || s.Len() != 0 || s.Rules() != 0 {
				t.Fatal("policies in an empty snapshot")
			}
		})
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	s := decideSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"})
	etl := testClient("prod", map[string]string{"tier": "etl"})
	etl.ServiceAccount = "etl-runner"
	cases := map[string]DecideArgs{
		"exact":    {Client: llm, Host: "models.example.com", Port: 443},
		"glob":     {Client: llm, Host: "a.b.blob.example.net", Port: 443},
		"miss":     {Client: llm, Host: "nothing.example.org", Port: 443},
		"port":     {Client: llm, Host: "a.blob.example.net", Port: 80},
		"selector": {Client: etl, Host: "api.eu.example.org", Port: 443},
		"ip":       {Client: llm, Host: "10.40.0.1", Port: 443},
		"metadata": {Client: llm, Host: "metadata", Port: 80},
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, func() { s.Decide(a) }); n != 0 {
				t.Fatalf("Decide allocates %v times", n)
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	good := doc("prod", "p", metav1.LabelSelector{}, nil, rule([]int32{443}, "a.example.com"))
	bad := doc("prod", "q", metav1.LabelSelector{}, nil, rule([]int32{443}, "*.com"))
	if _, err := Compile([]Document{good, bad}); err == nil {
		t.Fatal("an invalid document compiled")
	}
	dup := good
	dup.Origin = "other.yaml: document 1"
	_, err := Compile([]Document{good, dup})
	if err == nil || !errorsIs(err, ErrDuplicatePolicy) {
		t.Fatalf("duplicate: %v", err)
	}
}
