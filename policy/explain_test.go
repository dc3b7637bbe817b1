package policy

import (
	"net/netip"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// explainSnapshot: four policies of "prod" around models.example.com.
func explainSnapshot(t testing.TB) *Snapshot {
	initModels := initRule([]int32{443}, "models.example.com")
	initModels.Purpose = "weights"
	batch := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"batch", "etl"}},
		{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	return mustCompile(t,
		doc("prod", "a-llm", labelSel("app", "llm"), []string{"llm-server"},
			rule([]int32{443}, "api.example.com"),
			initModels,
			rule([]int32{8443}, "*.example.com", "models.example.com"),
			addrRule([]int32{5432}, "10.60.0.0/16"),
		),
		withMode(doc("prod", "b-batch", batch, nil, rule([]int32{443}, "models.example.com")), ModeAudit),
		doc("prod", "c-web", labelSel("app", "web"), []string{"web"}, rule([]int32{443}, "**.example.com")),
		doc("other", "d", metav1.LabelSelector{}, nil, rule([]int32{443}, "models.example.com")),
	)
}

func TestExplain(t *testing.T) {
	s := explainSnapshot(t)
	pod := &Client{Namespace: "prod", Pod: "llm-0", ServiceAccount: "llm-server",
		Labels: map[string]string{"app": "llm", "tier": "web", "canary": "yes"}, Initialized: true}

	e := s.Explain(DecideArgs{Client: pod, Host: "models.example.com", Port: 443})
	if !reflect.DeepEqual(e.Decision, s.Decide(DecideArgs{Client: pod, Host: "models.example.com", Port: 443})) {
		t.Fatalf("Decision %+v is not Decide's", e.Decision)
	}
	if e.Decision.Reason != ReasonInitOnly || e.ClientMode != ModeEnforce || e.InstanceMode != ModeEnforce {
		t.Fatalf("explanation %+v", e)
	}
	want := []PolicyExplanation{
		{ID: "prod/a-llm", Origin: "test.yaml: prod/a-llm", Selects: true, Rules: []RuleExplanation{
			{Index: 1, Patterns: []string{"models.example.com"}, Ports: []int32{443}, PortMatch: true, Phase: PhaseInit, InitOnly: true, Purpose: "weights"},
			{Index: 2, Patterns: []string{"*.example.com", "models.example.com"}, Ports: []int32{8443}},
		}},
		{ID: "prod/b-batch", Origin: "test.yaml: prod/b-batch", Mode: ModeAudit, NotSelected: []SelectionMismatch{
			{Field: "podSelector", Want: "!canary", Have: "canary=yes"},
			{Field: "podSelector", Want: "tier in (batch,etl)", Have: "tier=web"},
		}, Rules: []RuleExplanation{
			{Index: 0, Patterns: []string{"models.example.com"}, Ports: []int32{443}, PortMatch: true},
		}},
		{ID: "prod/c-web", Origin: "test.yaml: prod/c-web", NotSelected: []SelectionMismatch{
			{Field: "serviceAccountNames", Want: "one of web", Have: "llm-server"},
			{Field: "podSelector", Want: "app=web", Have: "app=llm"},
		}, Rules: []RuleExplanation{
			{Index: 0, Patterns: []string{"**.example.com"}, Ports: []int32{443}, PortMatch: true},
		}},
	}
	if !reflect.DeepEqual(e.Policies, want) {
		t.Fatalf("policies\n got %+v\nwant %+v", e.Policies, want)
	}

	t.Run("the deciding rule", func(t *testing.T) {
		starting := *pod
		starting.Initialized = false
		e := s.Explain(DecideArgs{Client: &starting, Host: "models.example.com", Port: 443})
		r := e.Policies[0].Rules[0]
		if e.Decision.Rule != 1 || !r.Allows || !r.Decides || r.InitOnly {
			t.Fatalf("%+v %+v", e.Decision, r)
		}
	})
	t.Run("address rule", func(t *testing.T) {
		e := s.Explain(DecideArgs{Client: pod, Host: "10.60.1.2", Port: 5432})
		if !e.Address || len(e.Policies[0].Rules) != 1 {
			t.Fatalf("%+v", e)
		}
		r := e.Policies[0].Rules[0]
		if r.Index != 3 || !reflect.DeepEqual(r.CIDRs, []string{"10.60.0.0/16"}) || !r.Decides {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("audit policy makes the client's mode", func(t *testing.T) {
		etl := &Client{Namespace: "prod", Pod: "etl-0", ServiceAccount: "default", Labels: map[string]string{"tier": "etl"}}
		e := s.Explain(DecideArgs{Client: etl, Host: "evil.example.org", Port: 443})
		if e.ClientMode != ModeAudit || e.AuditPolicy != "prod/b-batch" || !e.Decision.WouldDeny || e.Decision.Policy != "prod/b-batch" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("no client", func(t *testing.T) {
		e := s.Explain(DecideArgs{Host: "models.example.com", Port: 443, Mode: ModeAudit})
		if e.Decision.Reason != ReasonUnknownClient || e.Policies != nil || e.ClientMode != ModeAudit {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("namespace without policies", func(t *testing.T) {
		e := s.Explain(DecideArgs{Client: &Client{Namespace: "dev"}, Host: "models.example.com", Port: 443})
		if e.Decision.Reason != ReasonNotAllowlisted || e.Policies != nil {
			t.Fatalf("%+v", e)
		}
	})
}

// checkExplainAgrees: the first rule that Allows, in order of precedence,
// is the decision's; none allows when the decision is a policy denial.
func checkExplainAgrees(t *testing.T, s *Snapshot, a DecideArgs) {
	t.Helper()
	e := s.Explain(a)
	var first *RuleExplanation
	firstPol := ""
	decides := 0
	for _, p := range e.Policies {
		for i := range p.Rules {
			if p.Rules[i].Allows && first == nil {
				first, firstPol = &p.Rules[i], p.ID
			}
			if p.Rules[i].Decides {
				decides++
			}
		}
	}
	d := e.Decision
	switch d.Reason {
	case ReasonAllowed:
		if first == nil || firstPol != d.Policy || first.Index != d.Rule || !first.Decides || decides != 1 {
			t.Fatalf("%s:%d: decision %+v, first allowing rule %s %+v", a.Host, a.Port, d, firstPol, first)
		}
	case ReasonNotAllowlisted, ReasonPortNotAllowed, ReasonInitOnly, ReasonIPLiteral:
		if first != nil || decides != 0 {
			t.Fatalf("%s:%d: decision %+v, but %s %+v allows", a.Host, a.Port, d, firstPol, first)
		}
	}
}

func TestExplainAgreesWithDecide(t *testing.T) {
	s := explainSnapshot(t)
	clients := []*Client{
		{Namespace: "prod", ServiceAccount: "llm-server", Labels: map[string]string{"app": "llm"}},
		{Namespace: "prod", ServiceAccount: "llm-server", Labels: map[string]string{"app": "llm"}, Initialized: true},
		{Namespace: "prod", ServiceAccount: "web", Labels: map[string]string{"app": "web"}},
		{Namespace: "prod", ServiceAccount: "default", Labels: map[string]string{"tier": "batch"}},
		{Namespace: "other", ServiceAccount: "default"},
	}
	for _, c := range clients {
		for _, host := range []string{"models.example.com", "api.example.com", "x.example.com", "a.b.example.com", "10.60.0.1", "192.0.2.1", "evil.example.org"} {
			for _, port := range []int{0, 443, 5432, 8443} {
				for _, mode := range []Mode{ModeEnforce, ModeAudit} {
					checkExplainAgrees(t, s, DecideArgs{Client: c, Host: host, Port: port, Mode: mode})
				}
			}
		}
	}
}

func TestGuardCheckAll(t *testing.T) {
	s := mustCompile(t,
		doc("prod", "p", labelSel("app", "llm"), nil, withCIDRs(rule([]int32{443}, "registry.corp.internal"), "10.40.0.0/16")),
		withMode(doc("prod", "q", labelSel("app", "onboard"), nil, rule([]int32{443}, "api.example.com")), ModeAudit),
	)
	llm := testClient("prod", map[string]string{"app": "llm"})
	onboard := testClient("prod", map[string]string{"app": "onboard"})
	allowed := s.Decide(DecideArgs{Client: llm, Host: "registry.corp.internal", Port: 443})
	audit := s.Decide(DecideArgs{Client: onboard, Host: "api.example.com", Port: 443})
	softened := s.Decide(DecideArgs{Client: onboard, Host: "evil.example.org", Port: 443})
	g := NewGuard(GuardConfig{})
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range ss {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	tests := []struct {
		name      string
		d         Decision
		addrs     []netip.Addr
		want      wantDecision
		permitted []string
	}{
		{"private inside the rule's cidrs", allowed, addrs("10.40.0.5"),
			wantDecision{true, false, ReasonAllowed, "prod/p", 0, ModeEnforce}, []string{"10.40.0.5:443"}},
		{"public and private outside: the public one is chosen", allowed, addrs("10.41.0.5", "93.184.216.34"),
			wantDecision{true, false, ReasonAllowed, "prod/p", 0, ModeEnforce}, []string{"93.184.216.34:443"}},
		{"only private outside: the first refusal", allowed, addrs("10.41.0.5", "172.16.0.1"),
			wantDecision{false, false, ReasonPrivate, "prod/p", 0, ModeEnforce}, nil},
		{"the never class wins over a private refusal", allowed, addrs("10.41.0.5", "169.254.169.254", "169.254.1.1"),
			wantDecision{false, false, ReasonMetadata, "", -1, ModeEnforce}, nil},
		{"mapped addresses are dialled plain", allowed, addrs("::ffff:10.40.0.5"),
			wantDecision{true, false, ReasonAllowed, "prod/p", 0, ModeEnforce}, []string{"10.40.0.5:443"}},
		{"audit: a private address is softened", audit, addrs("10.0.0.1"),
			wantDecision{true, true, ReasonPrivate, "prod/q", 0, ModeAudit}, []string{"10.0.0.1:443"}},
		{"audit: never is not", audit, addrs("169.254.169.254"),
			wantDecision{false, false, ReasonMetadata, "", -1, ModeEnforce}, nil},
		{"would_deny keeps its reason", softened, addrs("10.0.0.1", "93.184.216.34"),
			wantDecision{true, true, ReasonNotAllowlisted, "prod/q", -1, ModeAudit}, []string{"10.0.0.1:443", "93.184.216.34:443"}},
		{"no addresses: the decision stands", allowed, nil,
			wantDecision{true, false, ReasonAllowed, "prod/p", 0, ModeEnforce}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, permitted := g.CheckAll(tt.d, tt.addrs, 443)
			tt.want.check(t, d)
			var got []string
			for _, ap := range permitted {
				got = append(got, ap.String())
			}
			if !reflect.DeepEqual(got, tt.permitted) {
				t.Fatalf("permitted %v, want %v", got, tt.permitted)
			}
			checks, final := g.Explain(tt.d, tt.addrs, 443)
			if !reflect.DeepEqual(final, d) || len(checks) != len(tt.addrs) {
				t.Fatalf("Explain: %+v %+v", checks, final)
			}
			n := 0
			for _, c := range checks {
				if c.Permitted {
					n++
				}
			}
			if n != len(permitted) {
				t.Fatalf("Explain permits %d, CheckAll %d: %+v", n, len(permitted), checks)
			}
		})
	}
}

func withCIDRs(r EgressRule, c ...string) EgressRule { r.CIDRs = c; return r }
