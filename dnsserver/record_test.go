package dnsserver

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// TestRecordOutcome: verdict and reason are the policy's decision; what
// became of the query is the outcome.
func TestRecordOutcome(t *testing.T) {
	f := newFixture(t, func(s *Config, _ *resolver.Config) { s.SearchDomains = []string{"ec2.internal"} })
	g := newFixture(t, func(s *Config, _ *resolver.Config) { s.Mode = policy.ModeAudit })
	tests := []struct {
		name    string
		fx      *fixture
		src     string
		qname   string
		verdict string
		reason  string
		outcome string
		prepare func()
	}{
		{"answered", f, "127.0.0.2", "models.test", "allow", "allowed", "ok", nil},
		{"nxdomain from upstream is answered", f, "127.0.0.2", "nx.blob.test", "allow", "allowed", "ok", nil},
		{"denied", f, "127.0.0.2", "evil.test", "deny", "not-allowlisted", "refused", nil},
		{"unknown client", f, "127.0.0.9", "models.test", "deny", "unknown-client", "refused", nil},
		{"search expansion answered here", f, "127.0.0.2", "models.test.ec2.internal", "allow", "search-expansion", "ok", nil},
		{"cluster domain", f, "127.0.0.2", "db.llm-prod.svc.cluster.local", "allow", "cluster-domain", "ok", nil},
		{"never-class address", f, "127.0.0.2", "meta.blob.test", "deny", "metadata", "refused", nil},
		{"audit mode would deny", g, "127.0.0.2", "evil.test", "allow", "not-allowlisted", "ok", nil},
		{"upstream failed, nothing stale", f, "127.0.0.2", "x.blob.test", "allow", "allowed", "resolve-failed",
			func() { f.up.Failing.Store(true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare()
			}
			tc.fx.ask(t, tc.src, "udp", tc.qname, dns.TypeA, 1232)
			rec := tc.fx.audit.last(t, tc.qname)
			if rec.Verdict != tc.verdict || rec.Reason != tc.reason || rec.Outcome != tc.outcome {
				t.Errorf("verdict %q reason %q outcome %q, want %q %q %q", rec.Verdict, rec.Reason, rec.Outcome, tc.verdict, tc.reason, tc.outcome)
			}
			if rec.Start.IsZero() || rec.Start.After(rec.Time) {
				t.Errorf("start %v, time %v", rec.Start, rec.Time)
			}
		})
	}
	t.Run("rule kept with search expansion", func(t *testing.T) {
		if rec := f.audit.last(t, "models.test.ec2.internal"); rec.Policy != "llm-prod/llm" || rec.Rule == nil {
			t.Errorf("policy %q rule %v", rec.Policy, rec.Rule)
		}
	})
}

// TestProbeMarker: a query with the EDNS0 option 65431 is recorded with
// its data as probe, bounded and sanitized; the decision is the same as
// without it.
func TestProbeMarker(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name  string
		qname string
		data  string
		want  string
		rcode int
	}{
		{"allowed", "models.test", "dns-allowed", "dns-allowed", dns.RcodeSuccess},
		{"denied, decision unchanged", "evil.test", "negative/evil", "negative/evil", dns.RcodeNameError},
		{"sanitized", "models.test", "a\"b\nc\x00d{}", "a_b_c_d__", dns.RcodeSuccess},
		{"bounded", "models.test", strings.Repeat("p", 300), strings.Repeat("p", 64), dns.RcodeSuccess},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion(tc.qname+".", dns.TypeA)
			m.SetEdns0(1232, false)
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: ProbeOption, Data: []byte(tc.data)})
			resp := f.exchange(t, "127.0.0.2", "udp", m)
			if resp.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
			}
			if rec := f.audit.last(t, tc.qname); rec.Probe != tc.want {
				t.Errorf("probe %q, want %q", rec.Probe, tc.want)
			}
		})
	}
	t.Run("no option, no probe", func(t *testing.T) {
		f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232)
		if rec := f.audit.last(t, "models.test"); rec.Probe != "" {
			t.Errorf("probe %q", rec.Probe)
		}
	})
}

// TestAuditUnavailable: while records cannot be written (--audit-failure
// closed), queries are refused with reason audit-unavailable, nothing is
// asked upstream, and each is still recorded; once the sink is back, they
// are served again.
func TestAuditUnavailable(t *testing.T) {
	var down atomic.Bool
	f := newFixture(t, func(s *Config, _ *resolver.Config) { s.AuditAvailable = func() bool { return !down.Load() } })
	down.Store(true)
	before := f.up.Total.Load()
	for _, network := range []string{"udp", "tcp"} {
		resp := f.ask(t, "127.0.0.2", network, "models.test", dns.TypeA, 1232)
		if resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 {
			t.Fatalf("%s: answer %v, want REFUSED", network, resp)
		}
		rec := f.audit.last(t, "models.test")
		if rec.Verdict != "deny" || rec.Reason != "audit-unavailable" || rec.Outcome != "refused" || rec.Client.Pod != "llm-0" {
			t.Errorf("%s: record %+v", network, rec)
		}
	}
	if f.up.Total.Load() != before {
		t.Error("the upstream was asked while audit was unavailable")
	}
	down.Store(false)
	if resp := f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("after recovery: %s", dns.RcodeToString[resp.Rcode])
	}
}
