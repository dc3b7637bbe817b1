package dnsserver

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
)

// TestServerOwnerFiltering: the authoritative server of an allowed name
// adds records owned by other names (an address for a name the pod may not
// reach, a CNAME from elsewhere), or points the chain at a metadata name.
// Nothing of another owner is forwarded or recorded; a chain to a metadata
// name is denied whatever the type, and the metadata name is never asked.
func TestServerOwnerFiltering(t *testing.T) {
	f := newFixture(t, nil)
	f.up.Set("foreign.blob.test./A",
		"foreign.blob.test. 60 IN A 203.0.113.40",
		"evil.test. 60 IN A 198.51.100.66")
	f.up.Set("foreign.blob.test./AAAA",
		"victim.example. 60 IN AAAA 2001:db8::66",
		"foreign.blob.test. 60 IN AAAA 2001:db8::40")
	f.up.Set("chain.blob.test./A",
		"edge3.example.net. 60 IN A 203.0.113.23",
		"chain.blob.test. 60 IN CNAME edge3.example.net.",
		"edge3.example.net. 60 IN TXT \"smuggled\"",
		"other.example. 60 IN A 198.51.100.67")
	f.up.Set("to-meta.blob.test./A", "to-meta.blob.test. 60 IN CNAME metadata.google.internal.",
		"metadata.google.internal. 60 IN A 169.254.169.254")
	f.up.Set("to-meta.blob.test./TXT", "to-meta.blob.test. 60 IN CNAME metadata.google.internal.")
	f.up.Set("to-meta.blob.test./HTTPS", "to-meta.blob.test. 60 IN CNAME metadata.google.internal.")
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answer  []string // dns.answers of the record, and what the pod got
		cnames  []string
		reason  policy.Reason
		outcome string
	}{
		{"extra A of a denied name", "foreign.blob.test", dns.TypeA, dns.RcodeSuccess,
			[]string{"203.0.113.40"}, nil, policy.ReasonAllowed, "ok"},
		{"extra AAAA first", "foreign.blob.test", dns.TypeAAAA, dns.RcodeSuccess,
			[]string{"2001:db8::40"}, nil, policy.ReasonAllowed, "ok"},
		{"chain in order, foreign owner dropped", "chain.blob.test", dns.TypeA, dns.RcodeSuccess,
			[]string{"203.0.113.23", "\"smuggled\""}, []string{"edge3.example.net"}, policy.ReasonAllowed, "ok"},
		{"A through a CNAME to a metadata name", "to-meta.blob.test", dns.TypeA, dns.RcodeNameError,
			nil, nil, policy.ReasonMetadata, "refused"},
		{"TXT through a CNAME to a metadata name", "to-meta.blob.test", dns.TypeTXT, dns.RcodeNameError,
			nil, nil, policy.ReasonMetadata, "refused"},
		{"HTTPS through a CNAME to a metadata name", "to-meta.blob.test", dns.TypeHTTPS, dns.RcodeNameError,
			nil, nil, policy.ReasonMetadata, "refused"},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				resp := f.ask(t, "127.0.0.2", network, tc.qname, tc.qtype, 1232)
				if resp.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
				}
				for _, rr := range append(append([]dns.RR(nil), resp.Answer...), resp.Ns...) {
					if o := strings.ToLower(rr.Header().Name); o != tc.qname+"." && !slices.Contains(tc.cnames, strings.TrimSuffix(o, ".")) && rr.Header().Rrtype != dns.TypeSOA {
						t.Errorf("record of another owner reached the pod: %v", rr)
					}
				}
				rec := f.audit.last(t, tc.qname)
				if rec.Reason != string(tc.reason) || rec.Outcome != tc.outcome {
					t.Errorf("record reason %q outcome %q, want %q %q", rec.Reason, rec.Outcome, tc.reason, tc.outcome)
				}
				if tc.rcode == dns.RcodeSuccess {
					if !slices.Equal(rec.DNS.Answers, tc.answer) || !slices.Equal(rec.DNS.CNAMEs, tc.cnames) {
						t.Errorf("record answers %q cnames %q, want %q %q", rec.DNS.Answers, rec.DNS.CNAMEs, tc.answer, tc.cnames)
					}
					if len(resp.Answer) != len(tc.answer)+len(tc.cnames) {
						t.Errorf("%d records given, want %d: %v", len(resp.Answer), len(tc.answer)+len(tc.cnames), resp.Answer)
					}
				} else if len(resp.Answer) != 0 {
					t.Errorf("a denial carries records: %v", resp.Answer)
				}
			})
		}
	}
	for _, qtype := range []string{"A", "AAAA", "TXT", "HTTPS"} {
		if n := f.up.Count("metadata.google.internal.", qtype, "udp") + f.up.Count("metadata.google.internal.", qtype, "tcp"); n != 0 {
			t.Errorf("metadata.google.internal %s asked upstream %d times", qtype, n)
		}
	}
	t.Run("cluster DNS CNAME to a metadata name", func(t *testing.T) {
		// An ExternalName Service is a CNAME the cluster DNS serves.
		f.cluster.Set("meta.llm-prod.svc.cluster.local./A", "meta.llm-prod.svc.cluster.local. 5 IN CNAME metadata.google.internal.",
			"metadata.google.internal. 5 IN A 169.254.169.254")
		resp := f.ask(t, "127.0.0.2", "udp", "meta.llm-prod.svc.cluster.local", dns.TypeA, 1232)
		if resp.Rcode != dns.RcodeNameError || len(resp.Answer) != 0 {
			t.Fatalf("answer %v", resp)
		}
		if rec := f.audit.last(t, "meta.llm-prod.svc.cluster.local"); rec.Verdict != "deny" || rec.Reason != "metadata" {
			t.Errorf("record verdict %q reason %q, want deny metadata", rec.Verdict, rec.Reason)
		}
	})
}

// TestServerStripsECH: the HTTPS answer a pod gets has no ech SvcParam,
// from the upstream and from the cache.
func TestServerStripsECH(t *testing.T) {
	f := newFixture(t, nil)
	f.up.Set("ech.blob.test./HTTPS", `ech.blob.test. 60 IN HTTPS 1 . alpn="h2" ech="AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJw=="`)
	for _, try := range []string{"miss", "hit"} {
		t.Run(try, func(t *testing.T) {
			resp := f.ask(t, "127.0.0.2", "udp", "ech.blob.test", dns.TypeHTTPS, 1232)
			h, ok := firstRR(resp).(*dns.HTTPS)
			if !ok || len(h.Value) != 1 || h.Value[0].Key() != dns.SVCB_ALPN {
				t.Fatalf("answer %v, want the record with alpn only", resp.Answer)
			}
			if rec := f.audit.last(t, "ech.blob.test"); len(rec.DNS.Answers) != 1 || strings.Contains(rec.DNS.Answers[0], "ech=") {
				t.Errorf("record answers %q", rec.DNS.Answers)
			}
		})
	}
}
