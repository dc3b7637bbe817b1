package dnsserver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

func TestServerDecidesByName(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name      string
		src       string
		qname     string
		qtype     uint16
		rcode     int
		answers   []string // addresses expected in the answer, in order
		blocked   string   // EDE 15 text; "" means no EDE 15
		verdict   string
		reason    policy.Reason
		upstream  int // queries the upstream must have seen for qname/qtype
		wantRRs   int // minimum answer records (for non-address types)
		auditRule bool
	}{
		{name: "exact allowed", src: "127.0.0.2", qname: "models.test", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			answers: []string{"203.0.113.10"}, verdict: "allow", reason: policy.ReasonAllowed, upstream: 1, auditRule: true},
		{name: "upper case and AAAA", src: "127.0.0.2", qname: "MODELS.test", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess,
			answers: []string{"2001:db8::10"}, verdict: "allow", reason: policy.ReasonAllowed, upstream: 1, auditRule: true},
		{name: "wildcard with cname chain", src: "127.0.0.2", qname: "x.blob.test", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			answers: []string{"203.0.113.20"}, verdict: "allow", reason: policy.ReasonAllowed, upstream: 1, wantRRs: 2},
		{name: "https record decided by name", src: "127.0.0.2", qname: "models.test", qtype: dns.TypeHTTPS, rcode: dns.RcodeSuccess,
			verdict: "allow", reason: policy.ReasonAllowed, upstream: 1, wantRRs: 1},
		{name: "txt decided by name", src: "127.0.0.2", qname: "models.test", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess,
			verdict: "allow", reason: policy.ReasonAllowed, upstream: 1, wantRRs: 1},
		{name: "allowed but nxdomain upstream", src: "127.0.0.2", qname: "nx.blob.test", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			verdict: "allow", reason: policy.ReasonAllowed, upstream: 1},
		{name: "not allowlisted", src: "127.0.0.2", qname: "evil.test", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			blocked: "egressd: not-allowlisted", verdict: "deny", reason: policy.ReasonNotAllowlisted},
		{name: "not allowlisted txt (tunnelling)", src: "127.0.0.2", qname: "aGVsbG8.evil.test", qtype: dns.TypeTXT, rcode: dns.RcodeNameError,
			blocked: "egressd: not-allowlisted", verdict: "deny", reason: policy.ReasonNotAllowlisted},
		{name: "apex not matched by wildcard", src: "127.0.0.2", qname: "blob.test", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			blocked: "egressd: not-allowlisted", verdict: "deny", reason: policy.ReasonNotAllowlisted},
		{name: "metadata name", src: "127.0.0.2", qname: "metadata.google.internal", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			blocked: "egressd: metadata", verdict: "deny", reason: policy.ReasonMetadata},
		{name: "pod without policy", src: "127.0.0.3", qname: "models.test", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			blocked: "egressd: not-allowlisted", verdict: "deny", reason: policy.ReasonNotAllowlisted, upstream: -1},
		{name: "allowed name pointing at metadata address", src: "127.0.0.2", qname: "meta.blob.test", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			blocked: "egressd: metadata", verdict: "deny", reason: policy.ReasonMetadata, upstream: 1},
		{name: "never-class address stripped, public kept", src: "127.0.0.2", qname: "mixed.blob.test", qtype: dns.TypeA, rcode: dns.RcodeSuccess,
			answers: []string{"203.0.113.30"}, verdict: "allow", reason: policy.ReasonAllowed, upstream: 1},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				before := f.up.Count(dns.Fqdn(strings.ToLower(tc.qname)), dns.TypeToString[tc.qtype], "udp")
				resp := f.ask(t, tc.src, network, tc.qname, tc.qtype, 1232)
				if resp.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
				}
				if got := answerAddrs(resp); tc.answers != nil && !slices.Equal(got, tc.answers) {
					t.Errorf("answers %v, want %v", got, tc.answers)
				}
				if len(resp.Answer) < tc.wantRRs {
					t.Errorf("%d answer records, want at least %d", len(resp.Answer), tc.wantRRs)
				}
				e := ede(resp)
				switch {
				case tc.blocked == "" && e != nil && e.InfoCode == dns.ExtendedErrorCodeBlocked:
					t.Errorf("unexpected EDE %v", e)
				case tc.blocked != "" && (e == nil || e.InfoCode != dns.ExtendedErrorCodeBlocked || e.ExtraText != tc.blocked):
					t.Errorf("EDE %v, want 15 %q", e, tc.blocked)
				}
				rec := f.audit.last(t, strings.ToLower(tc.qname))
				if rec.Kind != "dns" || rec.Verdict != tc.verdict || rec.Reason != string(tc.reason) || rec.QType != dns.TypeToString[tc.qtype] {
					t.Errorf("audit kind %q verdict %q reason %q qtype %q, want dns %q %q %q", rec.Kind, rec.Verdict, rec.Reason, rec.QType, tc.verdict, tc.reason, dns.TypeToString[tc.qtype])
				}
				if rec.Client.IP != tc.src || rec.Client.Pod == "" || rec.DNS == nil || rec.DNS.Rcode != dns.RcodeToString[tc.rcode] {
					t.Errorf("audit client %+v dns %+v", rec.Client, rec.DNS)
				}
				if tc.auditRule && (rec.Policy != "llm-prod/llm" || rec.Rule == nil) {
					t.Errorf("audit policy %q rule %v, want llm-prod/llm and a rule", rec.Policy, rec.Rule)
				}
				after := f.up.Count(dns.Fqdn(strings.ToLower(tc.qname)), dns.TypeToString[tc.qtype], "udp")
				switch {
				case tc.upstream == 0 && after != before:
					t.Errorf("denied name reached the upstream (%d queries)", after-before)
				case tc.upstream > 0 && after == 0:
					t.Errorf("allowed name never reached the upstream")
				}
			})
		}
	}
	t.Run("second ask is a cache hit", func(t *testing.T) {
		n := f.up.Count("models.test.", "A", "udp")
		f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232)
		if got := f.up.Count("models.test.", "A", "udp"); got != n {
			t.Errorf("upstream asked again (%d -> %d)", n, got)
		}
		if rec := f.audit.last(t, "models.test"); !rec.DNS.Cached || len(rec.DNS.Answers) != 1 || rec.DNS.TTL != 300 {
			t.Errorf("audit dns %+v, want cached, one answer, ttl 300", rec.DNS)
		}
	})
}

func TestServerRefusesUnknownClient(t *testing.T) {
	f := newFixture(t, nil)
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			total := f.up.Total.Load()
			resp := f.ask(t, "127.0.0.9", network, "models.test", dns.TypeA, 1232)
			if resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 || resp.RecursionAvailable {
				t.Fatalf("rcode %s answers %d RA %v, want REFUSED, nothing, no RA", dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.RecursionAvailable)
			}
			if f.up.Total.Load() != total {
				t.Error("an unknown client's query reached the upstream")
			}
			rec := f.audit.last(t, "models.test")
			if rec.Verdict != "deny" || rec.Reason != "unknown-client" || rec.Client.IP != "127.0.0.9" || rec.Client.Pod != "" {
				t.Errorf("audit %+v", rec)
			}
		})
	}
}

func TestServerMalformedQueries(t *testing.T) {
	f := newFixture(t, nil)
	mk := func(mut func(m *dns.Msg)) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("models.test.", dns.TypeA)
		mut(m)
		return m
	}
	tests := []struct {
		name  string
		msg   *dns.Msg
		rcode int
	}{
		{"two questions", mk(func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), dns.RcodeFormatError},
		{"no question", mk(func(m *dns.Msg) { m.Question = nil }), dns.RcodeFormatError},
		{"chaos class", mk(func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), dns.RcodeRefused},
		{"axfr", mk(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }), dns.RcodeRefused},
		{"notify opcode", mk(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), dns.RcodeNotImplemented},
		{"edns version 1", mk(func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), dns.RcodeBadVers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.exchange(t, "127.0.0.2", "udp", tc.msg)
			if resp.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
			}
			if len(resp.Answer) != 0 {
				t.Errorf("answers %v", resp.Answer)
			}
		})
	}
	t.Run("ANY answered minimally (RFC 8482)", func(t *testing.T) {
		total := f.up.Total.Load()
		resp := f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeANY, 1232)
		h, ok := firstRR(resp).(*dns.HINFO)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 || !ok || h.Cpu != "RFC8482" {
			t.Fatalf("answer %v", resp)
		}
		if f.up.Total.Load() != total {
			t.Error("ANY reached the upstream")
		}
	})
}

func firstRR(m *dns.Msg) dns.RR {
	if len(m.Answer) == 0 {
		return nil
	}
	return m.Answer[0]
}

func TestServerAuditMode(t *testing.T) {
	f := newFixture(t, func(s *Config, _ *resolver.Config) { s.Mode = policy.ModeAudit })
	resp := f.ask(t, "127.0.0.2", "udp", "evil.test", dns.TypeA, 1232)
	if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []string{"203.0.113.66"}) {
		t.Fatalf("audit mode must forward a would-deny name: %v", resp)
	}
	rec := f.audit.last(t, "evil.test")
	if rec.Verdict != "allow" || !rec.WouldDeny || rec.Reason != "not-allowlisted" || rec.Mode != "audit" {
		t.Errorf("audit record %+v", rec)
	}
	t.Run("metadata still denied", func(t *testing.T) {
		resp := f.ask(t, "127.0.0.2", "udp", "metadata.google.internal", dns.TypeA, 1232)
		if resp.Rcode != dns.RcodeNameError || ede(resp) == nil {
			t.Fatalf("metadata name in audit mode: %v", resp)
		}
		if rec := f.audit.last(t, "metadata.google.internal"); rec.Verdict != "deny" || rec.WouldDeny {
			t.Errorf("audit record %+v", rec)
		}
	})
	t.Run("unknown client still refused", func(t *testing.T) {
		if resp := f.ask(t, "127.0.0.9", "udp", "evil.test", dns.TypeA, 1232); resp.Rcode != dns.RcodeRefused {
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
	})
}

func TestServerSearchExpansionAndClusterDomain(t *testing.T) {
	f := newFixture(t, func(s *Config, _ *resolver.Config) {
		s.SearchDomains = []string{"ec2.internal."}
		s.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers []string
		verdict string
		reason  string
		cluster bool // the cluster DNS is asked
	}{
		{"namespace search domain", "models.test.llm-prod.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil, "allow", "search-expansion", false},
		{"svc search domain", "x.blob.test.svc.cluster.local", dns.TypeAAAA, dns.RcodeNameError, nil, "allow", "search-expansion", false},
		{"cluster search domain", "models.test.cluster.local", dns.TypeA, dns.RcodeNameError, nil, "allow", "search-expansion", false},
		{"node search domain", "models.test.ec2.internal", dns.TypeA, dns.RcodeNameError, nil, "allow", "search-expansion", false},
		{"denied name plus node search domain", "evil.test.ec2.internal", dns.TypeA, dns.RcodeNameError, nil, "deny", "not-allowlisted", false},
		{"denied name plus cluster search domain goes to cluster", "evil.test.llm-prod.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil, "allow", "cluster-domain", true},
		{"service", "db.llm-prod.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.10"}, "allow", "cluster-domain", true},
		{"reverse zone", "2.0.0.127.in-addr.arpa", dns.TypePTR, dns.RcodeSuccess, nil, "allow", "cluster-domain", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upTotal := f.up.Total.Load()
			clTotal := f.cluster.Total.Load()
			resp := f.ask(t, "127.0.0.2", "udp", tc.qname, tc.qtype, 1232)
			if resp.Rcode != tc.rcode || (tc.answers != nil && !slices.Equal(answerAddrs(resp), tc.answers)) {
				t.Fatalf("answer %v", resp)
			}
			if tc.reason == "search-expansion" && ede(resp) != nil {
				t.Errorf("search expansion answered with EDE %v: it is not a denial", ede(resp))
			}
			if f.up.Total.Load() != upTotal {
				t.Error("the upstream was asked")
			}
			if asked := f.cluster.Total.Load() != clTotal; asked != tc.cluster {
				t.Errorf("cluster DNS asked = %v, want %v", asked, tc.cluster)
			}
			rec := f.audit.last(t, tc.qname)
			if rec.Verdict != tc.verdict || rec.Reason != tc.reason {
				t.Errorf("audit verdict %q reason %q, want %q %q", rec.Verdict, rec.Reason, tc.verdict, tc.reason)
			}
		})
	}
}

func TestServerTruncation(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name    string
		network string
		bufsize uint16
		tc      bool
		maxLen  int
	}{
		{"udp without edns: 512", "udp", 0, true, 512},
		{"udp edns 1232", "udp", 1232, true, 1232},
		{"udp edns 4096 capped at server's 1232", "udp", 4096, true, 1232},
		{"tcp gets everything", "tcp", 1232, false, 65535},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.ask(t, "127.0.0.2", tc.network, "big.blob.test", dns.TypeA, tc.bufsize)
			if resp.Truncated != tc.tc {
				t.Errorf("TC = %v, want %v", resp.Truncated, tc.tc)
			}
			resp.Compress = true
			if l := resp.Len(); l > tc.maxLen {
				t.Errorf("answer %d bytes, above %d", l, tc.maxLen)
			}
			if !tc.tc && len(resp.Answer) != 100 {
				t.Errorf("%d answers over TCP, want 100", len(resp.Answer))
			}
		})
	}
	t.Run("upstream truncated answer retried over tcp", func(t *testing.T) {
		if f.up.Count("big.blob.test.", "A", "tcp") == 0 {
			t.Error("the resolver never retried the truncated upstream answer over TCP")
		}
	})
}

func TestServerTransparent(t *testing.T) {
	f := newFixture(t, func(s *Config, _ *resolver.Config) {
		s.AdvertiseIP = mustAddr("127.0.0.77")
	})
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers []string
		maxTTL  uint32
	}{
		{"A answered with advertise ip", "models.test", dns.TypeA, dns.RcodeSuccess, []string{"127.0.0.77"}, 30},
		{"cname chain answered with advertise ip", "x.blob.test", dns.TypeA, dns.RcodeSuccess, []string{"127.0.0.77"}, 30},
		{"AAAA empty without ipv6 advertise", "models.test", dns.TypeAAAA, dns.RcodeSuccess, nil, 0},
		{"https hidden", "models.test", dns.TypeHTTPS, dns.RcodeSuccess, nil, 0},
		{"nonexistent allowed name", "nx.blob.test", dns.TypeA, dns.RcodeNameError, nil, 0},
		{"denied name", "evil.test", dns.TypeA, dns.RcodeNameError, nil, 0},
		{"name on a metadata address", "meta.blob.test", dns.TypeA, dns.RcodeNameError, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.ask(t, "127.0.0.2", "udp", tc.qname, tc.qtype, 1232)
			if resp.Rcode != tc.rcode || !slices.Equal(answerAddrs(resp), tc.answers) {
				t.Fatalf("answer %v", resp)
			}
			if tc.answers == nil && len(resp.Answer) != 0 {
				t.Errorf("answers %v, want none", resp.Answer)
			}
			for _, rr := range resp.Answer {
				if rr.Header().Ttl > tc.maxTTL {
					t.Errorf("TTL %d above %d", rr.Header().Ttl, tc.maxTTL)
				}
			}
		})
	}
}

func TestServerServeStale(t *testing.T) {
	f := newFixture(t, nil)
	f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232)
	f.clock.Advance(301e9)
	f.up.Failing.Store(true)
	resp := f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232)
	if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []string{"203.0.113.10"}) || resp.Answer[0].Header().Ttl != 30 {
		t.Fatalf("stale answer %v", resp)
	}
	if rec := f.audit.last(t, "models.test"); !rec.DNS.Stale {
		t.Errorf("audit dns %+v, want stale", rec.DNS)
	}
	t.Run("no stale entry: SERVFAIL with EDE network error", func(t *testing.T) {
		resp := f.ask(t, "127.0.0.2", "udp", "x.blob.test", dns.TypeA, 1232)
		if e := ede(resp); resp.Rcode != dns.RcodeServerFailure || e == nil || e.InfoCode != dns.ExtendedErrorCodeNetworkError {
			t.Fatalf("answer %v", resp)
		}
		if rec := f.audit.last(t, "x.blob.test"); rec.Error == "" || rec.DNS.Rcode != "SERVFAIL" {
			t.Errorf("audit %+v", rec)
		}
	})
}

// TestServerReverseZone: only the PTR name of an address in ClusterCIDRs
// reaches the cluster DNS; every other reverse name is decided by the
// policy, since the cluster DNS forwards what it does not own (an
// exfiltration channel to whoever runs the reverse zone).
func TestServerReverseZone(t *testing.T) {
	f := newFixture(t, func(s *Config, _ *resolver.Config) {
		s.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	})
	v6 := "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa" // fd00::1
	tests := []struct {
		name    string
		qname   string
		cluster bool // forwarded to the cluster DNS
	}{
		{"address in the cluster ranges", "2.0.0.127.in-addr.arpa", true},
		{"IPv6 address in the cluster ranges", v6, true},
		{"secret label in front", "c2vjcmv0.2.0.0.127.in-addr.arpa", false},
		{"outside the ranges", "7.113.0.203.in-addr.arpa", false},
		{"secret label in front outside the ranges", "c2vjcmv0.113.0.203.in-addr.arpa", false},
		{"partial zone", "0.127.in-addr.arpa", false},
		{"leading zero", "02.0.0.127.in-addr.arpa", false},
		{"octet over 255", "256.0.0.127.in-addr.arpa", false},
		{"IPv6 wrong nibble count", v6[2:], false},
		{"IPv6 extra nibble", "0." + v6, false},
		{"IPv6 label of two nibbles", "10" + v6[3:], false},
		{"the zone itself", "in-addr.arpa", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clTotal := f.cluster.Total.Load()
			resp := f.ask(t, "127.0.0.2", "udp", tc.qname, dns.TypePTR, 1232)
			if asked := f.cluster.Total.Load() != clTotal; asked != tc.cluster {
				t.Fatalf("cluster DNS asked = %v, want %v", asked, tc.cluster)
			}
			rec := f.audit.last(t, tc.qname)
			if tc.cluster {
				if rec.Verdict != "allow" || rec.Reason != string(policy.ReasonClusterDomain) {
					t.Errorf("audit verdict %q reason %q, want allow cluster-domain", rec.Verdict, rec.Reason)
				}
				return
			}
			if e := ede(resp); resp.Rcode != dns.RcodeNameError || e == nil || e.InfoCode != dns.ExtendedErrorCodeBlocked {
				t.Errorf("answer %s EDE %v, want NXDOMAIN with EDE 15", dns.RcodeToString[resp.Rcode], e)
			}
			if rec.Verdict != "deny" {
				t.Errorf("audit verdict %q reason %q, want deny", rec.Verdict, rec.Reason)
			}
		})
	}

	t.Run("no ClusterCIDRs: nothing forwarded", func(t *testing.T) {
		f := newFixture(t, nil)
		resp := f.ask(t, "127.0.0.2", "udp", "2.0.0.127.in-addr.arpa", dns.TypePTR, 1232)
		if n := f.cluster.Total.Load(); n != 0 || resp.Rcode != dns.RcodeNameError {
			t.Fatalf("cluster DNS asked %d times, answer %s", n, dns.RcodeToString[resp.Rcode])
		}
	})
}
