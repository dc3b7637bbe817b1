package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withMode(d Document, m Mode) Document {
	d.Policy.Spec.Mode = m
	return d
}

func initRule(ports []int32, hosts ...string) EgressRule {
	r := rule(ports, hosts...)
	r.Phase = PhaseInit
	return r
}

func addrRule(ports []int32, cidrs ...string) EgressRule {
	return EgressRule{Ports: ports, CIDRs: cidrs}
}

func labelSel(k, v string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

// wantDecision is what a case of the tables below checks of a Decision.
type wantDecision struct {
	allowed   bool
	wouldDeny bool
	reason    Reason
	policy    string
	rule      int
	mode      Mode
}

func (w wantDecision) check(t *testing.T, d Decision) {
	t.Helper()
	if d.Allowed() != w.allowed || d.WouldDeny != w.wouldDeny || d.Reason != w.reason ||
		d.Policy != w.policy || d.Rule != w.rule || d.Mode != w.mode {
		t.Fatalf("got %+v\nwant %+v", d, w)
	}
	if d.WouldDeny && !d.Allowed() {
		t.Fatalf("would_deny on a denial: %+v", d)
	}
}

// modeSnapshot: pods labelled app=llm are selected by an audit-mode and an
// enforce-mode policy; app=web by a policy without spec.mode (the
// instance's); app=strict by an explicit enforce policy only.
func modeSnapshot(t testing.TB) *Snapshot {
	return mustCompile(t,
		withMode(doc("prod", "onboard", labelSel("app", "llm"), nil, rule([]int32{443}, "a.example.com")), ModeAudit),
		withMode(doc("prod", "llm", labelSel("app", "llm"), nil,
			rule([]int32{443}, "b.example.com"),
			addrRule([]int32{443}, "10.40.0.0/16"),
		), ModeEnforce),
		doc("prod", "web", labelSel("app", "web"), nil, rule([]int32{443}, "w.example.com")),
		withMode(doc("prod", "strict", labelSel("app", "strict"), nil, rule([]int32{443}, "s.example.com")), ModeEnforce),
		// A second audit policy selecting llm: later by name, so
		// "onboard" is the one a softened decision names.
		withMode(doc("prod", "zz-audit", labelSel("app", "llm"), nil, rule([]int32{443}, "z.example.com")), ModeAudit),
	)
}

func TestDecidePerPolicyMode(t *testing.T) {
	s := modeSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"})
	web := testClient("prod", map[string]string{"app": "web"})
	strict := testClient("prod", map[string]string{"app": "strict"})
	nobody := testClient("prod", map[string]string{"app": "none"})
	elsewhere := testClient("dev", map[string]string{"app": "llm"})

	tests := []struct {
		name   string
		client *Client
		host   string
		port   int
		inst   Mode
		want   wantDecision
	}{
		// Two policies select llm: "onboard" (audit) and "llm" (enforce).
		{"audit and enforce policy: a miss is would_deny naming the audit policy", llm, "evil.example.org", 443, ModeEnforce,
			wantDecision{true, true, ReasonNotAllowlisted, "prod/onboard", -1, ModeAudit}},
		{"audit and enforce policy: port miss softened", llm, "b.example.com", 80, ModeEnforce,
			wantDecision{true, true, ReasonPortNotAllowed, "prod/onboard", -1, ModeAudit}},
		{"audit and enforce policy: the enforce policy's rule allows, mode audit", llm, "b.example.com", 443, ModeEnforce,
			wantDecision{true, false, ReasonAllowed, "prod/llm", 0, ModeAudit}},
		{"audit and enforce policy: the audit policy's rule allows", llm, "a.example.com", 443, ModeEnforce,
			wantDecision{true, false, ReasonAllowed, "prod/onboard", 0, ModeAudit}},
		{"audit policy: ip literal outside address rules softened", llm, "192.0.2.1", 443, ModeEnforce,
			wantDecision{true, true, ReasonIPLiteral, "prod/onboard", -1, ModeAudit}},
		{"audit policy: metadata name stays denied", llm, "metadata.google.internal", 80, ModeEnforce,
			wantDecision{false, false, ReasonMetadata, "", -1, ModeEnforce}},
		{"audit policy: metadata address stays denied", llm, "169.254.169.254", 80, ModeEnforce,
			wantDecision{false, false, ReasonMetadata, "", -1, ModeEnforce}},
		{"audit policy: link-local stays denied", llm, "169.254.7.7", 443, ModeEnforce,
			wantDecision{false, false, ReasonLinkLocal, "", -1, ModeEnforce}},
		{"audit policy: invalid host stays denied", llm, "Evil.example.org", 443, ModeEnforce,
			wantDecision{false, false, ReasonInvalidHost, "", -1, ModeEnforce}},
		{"unknown client stays denied in audit", nil, "a.example.com", 443, ModeAudit,
			wantDecision{false, false, ReasonUnknownClient, "", -1, ModeEnforce}},

		// The instance's mode and policies without spec.mode.
		{"instance audit: policy without mode takes it", web, "evil.example.org", 443, ModeAudit,
			wantDecision{true, true, ReasonNotAllowlisted, "prod/web", -1, ModeAudit}},
		{"instance enforce: policy without mode takes it", web, "evil.example.org", 443, ModeEnforce,
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"instance default is enforce", web, "evil.example.org", 443, "",
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"instance audit: allowed by a policy without mode, mode audit", web, "w.example.com", 443, ModeAudit,
			wantDecision{true, false, ReasonAllowed, "prod/web", 0, ModeAudit}},
		{"instance audit with an explicit enforce policy denies", strict, "evil.example.org", 443, ModeAudit,
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"instance audit with an explicit enforce policy: allow is enforce", strict, "s.example.com", 443, ModeAudit,
			wantDecision{true, false, ReasonAllowed, "prod/strict", 0, ModeEnforce}},
		{"no selecting policy under instance audit", nobody, "evil.example.org", 443, ModeAudit,
			wantDecision{true, true, ReasonNotAllowlisted, "", -1, ModeAudit}},
		{"no selecting policy under instance enforce", nobody, "evil.example.org", 443, ModeEnforce,
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"an audit policy selects only its own namespace", elsewhere, "evil.example.org", 443, ModeEnforce,
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"namespace without policies under instance audit", elsewhere, "evil.example.org", 443, ModeAudit,
			wantDecision{true, true, ReasonNotAllowlisted, "", -1, ModeAudit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.check(t, s.Decide(DecideArgs{Client: tt.client, Host: tt.host, Port: tt.port, Mode: tt.inst}))
		})
	}
}

func TestDecideInitOnly(t *testing.T) {
	s := mustCompile(t,
		doc("prod", "a-bootstrap", labelSel("app", "llm"), nil,
			initRule([]int32{443}, "weights.example.com"),
			rule([]int32{443}, "api.example.com"),
			// init rule first, then an always rule for the same host.
			initRule([]int32{443}, "both.example.com"),
			rule([]int32{443}, "both.example.com"),
			initRule([]int32{443}, "**.cdn.example.com"),
			EgressRule{Ports: []int32{443}, CIDRs: []string{"10.50.0.0/16"}, Phase: PhaseInit},
		),
		// Another policy's always rule allows the init rule's host on 8443.
		doc("prod", "b-other", labelSel("app", "llm"), nil,
			rule([]int32{8443}, "weights.example.com"),
		),
		withMode(doc("prod", "c-audit", labelSel("app", "onboard"), nil,
			initRule([]int32{443}, "weights.example.com"),
		), ModeAudit),
	)
	starting := testClient("prod", map[string]string{"app": "llm"})
	ready := testClient("prod", map[string]string{"app": "llm"})
	ready.Initialized = true
	onboard := testClient("prod", map[string]string{"app": "onboard"})
	onboard.Initialized = true

	tests := []struct {
		name   string
		client *Client
		host   string
		port   int
		want   wantDecision
	}{
		{"not initialized: init rule allows", starting, "weights.example.com", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 0, ModeEnforce}},
		{"initialized: init-only", ready, "weights.example.com", 443,
			wantDecision{false, false, ReasonInitOnly, "", -1, ModeEnforce}},
		{"initialized: dns any port is init-only", ready, "x.cdn.example.com", 0,
			wantDecision{false, false, ReasonInitOnly, "", -1, ModeEnforce}},
		{"initialized: dns any port, another policy's always rule", ready, "weights.example.com", 0,
			wantDecision{true, false, ReasonAllowed, "prod/b-other", 0, ModeEnforce}},
		{"initialized: another policy's always rule on its port", ready, "weights.example.com", 8443,
			wantDecision{true, false, ReasonAllowed, "prod/b-other", 0, ModeEnforce}},
		{"initialized: a port no rule names is port-not-allowed", ready, "weights.example.com", 80,
			wantDecision{false, false, ReasonPortNotAllowed, "", -1, ModeEnforce}},
		{"not initialized: port mismatch is port-not-allowed", starting, "weights.example.com", 80,
			wantDecision{false, false, ReasonPortNotAllowed, "", -1, ModeEnforce}},
		{"initialized: always rule for the same host allows", ready, "both.example.com", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 3, ModeEnforce}},
		{"not initialized: the first rule decides", starting, "both.example.com", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 2, ModeEnforce}},
		{"initialized: always rule unaffected", ready, "api.example.com", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 1, ModeEnforce}},
		{"initialized: globstar init rule", ready, "x.y.cdn.example.com", 443,
			wantDecision{false, false, ReasonInitOnly, "", -1, ModeEnforce}},
		{"not initialized: globstar init rule", starting, "x.y.cdn.example.com", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 4, ModeEnforce}},
		{"not initialized: init address rule", starting, "10.50.1.1", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-bootstrap", 5, ModeEnforce}},
		{"initialized: init address rule", ready, "10.50.1.1", 443,
			wantDecision{false, false, ReasonInitOnly, "", -1, ModeEnforce}},
		{"initialized: init address rule, other port", ready, "10.50.1.1", 22,
			wantDecision{false, false, ReasonPortNotAllowed, "", -1, ModeEnforce}},
		{"initialized in an audit policy: would_deny init-only", onboard, "weights.example.com", 443,
			wantDecision{true, true, ReasonInitOnly, "prod/c-audit", -1, ModeAudit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.check(t, s.Decide(DecideArgs{Client: tt.client, Host: tt.host, Port: tt.port}))
		})
	}
}

func TestDecideAddressRules(t *testing.T) {
	registry := rule([]int32{443}, "registry.corp.internal")
	registry.CIDRs = []string{"10.40.0.0/16"}
	s := mustCompile(t,
		doc("prod", "a-names", labelSel("app", "llm"), nil, registry),
		doc("prod", "b-addresses", labelSel("app", "llm"), nil,
			rule([]int32{443}, "x.example.com"),
			addrRule([]int32{5432}, "10.60.0.0/16", "fd00:60::/48"),
			addrRule([]int32{443}, "0.0.0.0/0"),
		),
		doc("prod", "c-other-pods", labelSel("app", "web"), nil, addrRule([]int32{443}, "10.40.0.0/16")),
	)
	llm := testClient("prod", map[string]string{"app": "llm"})
	web := testClient("prod", map[string]string{"app": "web"})
	tests := []struct {
		name   string
		client *Client
		host   string
		port   int
		want   wantDecision
		cidrs  int
	}{
		{"hosts+cidrs opens the name", llm, "registry.corp.internal", 443,
			wantDecision{true, false, ReasonAllowed, "prod/a-names", 0, ModeEnforce}, 1},
		{"a wide address rule opens what hosts+cidrs does not", llm, "10.40.7.9", 443,
			wantDecision{true, false, ReasonAllowed, "prod/b-addresses", 2, ModeEnforce}, 1},
		{"address rule opens its range", llm, "10.60.7.9", 5432,
			wantDecision{true, false, ReasonAllowed, "prod/b-addresses", 1, ModeEnforce}, 2},
		{"address rule ipv6", llm, "fd00:60::9", 5432,
			wantDecision{true, false, ReasonAllowed, "prod/b-addresses", 1, ModeEnforce}, 2},
		{"address rule other port", llm, "10.60.7.9", 22,
			wantDecision{false, false, ReasonPortNotAllowed, "", -1, ModeEnforce}, 0},
		{"address rule opens no name", llm, "db.example.com", 5432,
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}, 0},
		{"address rule of a policy that does not select", web, "10.60.7.9", 5432,
			wantDecision{false, false, ReasonIPLiteral, "", -1, ModeEnforce}, 0},
		{"wide address rule never opens metadata", llm, "169.254.169.254", 443,
			wantDecision{false, false, ReasonMetadata, "", -1, ModeEnforce}, 0},
		{"wide address rule opens a public address", llm, "192.0.2.1", 443,
			wantDecision{true, false, ReasonAllowed, "prod/b-addresses", 2, ModeEnforce}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := s.Decide(DecideArgs{Client: tt.client, Host: tt.host, Port: tt.port})
			tt.want.check(t, d)
			if len(d.CIDRs) != tt.cidrs {
				t.Fatalf("CIDRs %v, want %d", d.CIDRs, tt.cidrs)
			}
		})
	}

	// Without the wide rule, the CONNECT of issue 10 is refused.
	narrow := mustCompile(t, doc("prod", "a-names", labelSel("app", "llm"), nil, registry))
	for _, host := range []string{"10.40.7.9", "::ffff:10.40.7.9", "10.40.0.1"} {
		t.Run("CONNECT "+host, func(t *testing.T) {
			wantDecision{false, false, ReasonIPLiteral, "", -1, ModeEnforce}.check(t,
				narrow.Decide(DecideArgs{Client: llm, Host: host, Port: 443}))
		})
	}
}

func TestDecideECH(t *testing.T) {
	ech := rule([]int32{443}, "front.example.com")
	ech.ECH = ECHAllow
	echAddr := addrRule([]int32{443}, "10.70.0.0/16")
	echAddr.ECH = ECHAllow
	s := mustCompile(t, doc("prod", "p", metav1.LabelSelector{}, nil,
		ech, rule([]int32{443}, "plain.example.com"), echAddr))
	c := testClient("prod", nil)
	for _, tt := range []struct {
		host string
		ech  bool
	}{
		{"front.example.com", true},
		{"plain.example.com", false},
		{"10.70.0.1", true},
		{"other.example.com", false},
	} {
		t.Run(tt.host, func(t *testing.T) {
			if d := s.Decide(DecideArgs{Client: c, Host: tt.host, Port: 443}); d.ECH != tt.ech {
				t.Fatalf("ECH %v, want %v: %+v", d.ECH, tt.ech, d)
			}
		})
	}
}

// TestDecisionDenyBecause: later stages get a new Decision; the mode of the
// first decides whether a refusal is softened, and a would_deny keeps the
// reason enforce mode would have given.
func TestDecisionDenyBecause(t *testing.T) {
	s := modeSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"}) // audit (onboard)
	strict := testClient("prod", map[string]string{"app": "strict"})
	allowedAudit := s.Decide(DecideArgs{Client: llm, Host: "b.example.com", Port: 443})
	allowedEnforce := s.Decide(DecideArgs{Client: strict, Host: "s.example.com", Port: 443})
	softened := s.Decide(DecideArgs{Client: llm, Host: "evil.example.org", Port: 443})
	denied := s.Decide(DecideArgs{Client: strict, Host: "evil.example.org", Port: 443})

	tests := []struct {
		name string
		got  Decision
		want wantDecision
	}{
		{"enforce: sni-mismatch denies, keeps the rule", allowedEnforce.Deny(ReasonSNIMismatch),
			wantDecision{false, false, ReasonSNIMismatch, "prod/strict", 0, ModeEnforce}},
		{"audit: sni-mismatch softened", allowedAudit.Deny(ReasonSNIMismatch),
			wantDecision{true, true, ReasonSNIMismatch, "prod/llm", 0, ModeAudit}},
		{"audit: ech softened", allowedAudit.Deny(ReasonECH),
			wantDecision{true, true, ReasonECH, "prod/llm", 0, ModeAudit}},
		{"audit: never class not softened", allowedAudit.Deny(ReasonMetadata),
			wantDecision{false, false, ReasonMetadata, "prod/llm", 0, ModeAudit}},
		{"would_deny keeps the first reason", softened.Deny(ReasonPrivate),
			wantDecision{true, true, ReasonNotAllowlisted, "prod/onboard", -1, ModeAudit}},
		{"would_deny turns into a denial for the never class", softened.Deny(ReasonLinkLocal),
			wantDecision{false, false, ReasonLinkLocal, "prod/onboard", -1, ModeAudit}},
		{"a denial stays", denied.Deny(ReasonSNIMismatch),
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"because: allowed with another reason", allowedEnforce.Because(ReasonSearchExpansion),
			wantDecision{true, false, ReasonSearchExpansion, "prod/strict", 0, ModeEnforce}},
		{"because: would_deny keeps its reason", softened.Because(ReasonSearchExpansion),
			wantDecision{true, true, ReasonNotAllowlisted, "prod/onboard", -1, ModeAudit}},
		{"because: a denial stays", denied.Because(ReasonClusterDomain),
			wantDecision{false, false, ReasonNotAllowlisted, "", -1, ModeEnforce}},
		{"denied before policy", Denied(ReasonRateLimited),
			wantDecision{false, false, ReasonRateLimited, "", -1, ModeEnforce}},
		{"denied before policy is not softened by Deny", Denied(ReasonAuditUnavailable).Deny(ReasonBadRequest),
			wantDecision{false, false, ReasonAuditUnavailable, "", -1, ModeEnforce}},
		{"allowed because", AllowedBecause(ReasonClusterDomain),
			wantDecision{true, false, ReasonClusterDomain, "", -1, ModeEnforce}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.want.check(t, tt.got) })
	}
}

func TestDecideModeDoesNotAllocate(t *testing.T) {
	s := modeSnapshot(t)
	llm := testClient("prod", map[string]string{"app": "llm"})
	web := testClient("prod", map[string]string{"app": "web"})
	web.Initialized = true
	cases := map[string]DecideArgs{
		"audit policy miss":    {Client: llm, Host: "evil.example.org", Port: 443},
		"audit policy allow":   {Client: llm, Host: "b.example.com", Port: 443},
		"instance audit miss":  {Client: web, Host: "evil.example.org", Port: 443, Mode: ModeAudit},
		"instance audit allow": {Client: web, Host: "w.example.com", Port: 443, Mode: ModeAudit},
		"address rule":         {Client: llm, Host: "10.40.1.1", Port: 443},
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, func() { s.Decide(a) }); n != 0 {
				t.Fatalf("Decide allocates %v times", n)
			}
		})
	}
}
