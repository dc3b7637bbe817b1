package resolver

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/policy"
)

// FuzzOwnedAnswer feeds arbitrary upstream answers to the owner filter:
// every record kept is owned by the question's name or by a name the kept
// CNAMEs lead to from it, in chain order; nothing owned by a metadata name
// is kept; no HTTPS or SVCB record keeps an ech SvcParam.
func FuzzOwnedAnswer(f *testing.F) {
	for _, rrs := range [][]string{
		{"a.test. 60 IN A 203.0.113.1", "b.test. 60 IN A 198.51.100.1"},
		{"b.test. 60 IN A 203.0.113.2", "a.test. 60 IN CNAME b.test.", "a.test. 60 IN CNAME c.test."},
		{"a.test. 60 IN CNAME metadata.google.internal.", "metadata.google.internal. 60 IN A 169.254.169.254"},
		{"a.test. 60 IN CNAME a.test."},
		{`a.test. 60 IN HTTPS 1 . alpn="h2" ech="AAAA"`},
	} {
		m := new(dns.Msg)
		m.SetQuestion("a.test.", dns.TypeA)
		for _, s := range rrs {
			m.Answer = append(m.Answer, dnstest.MustRR(s))
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		m := new(dns.Msg)
		if m.Unpack(wire) != nil || len(m.Question) != 1 {
			return
		}
		name := m.Question[0].Name
		out := ownedAnswer(name, m.Answer, DefaultMaxCNAME)
		if len(out) > len(m.Answer) {
			t.Fatalf("%d records out of %d", len(out), len(m.Answer))
		}
		// The records come owner by owner along the chain: each owner's
		// group (at most one CNAME in it) before its CNAME target's.
		cur, next := strings.ToLower(name), ""
		links := 0
		for _, rr := range out {
			owner := strings.ToLower(rr.Header().Name)
			if owner != cur {
				if owner != next {
					t.Fatalf("record %v of another owner or out of chain order (at %q, next %q)", rr, cur, next)
				}
				cur, next = next, ""
			}
			if policy.IsMetadataName(owner) {
				t.Fatalf("record of a metadata name kept: %v", rr)
			}
			switch v := rr.(type) {
			case *dns.CNAME:
				if next != "" {
					t.Fatalf("second CNAME of %q kept", owner)
				}
				next = strings.ToLower(dns.Fqdn(v.Target))
				links++
			case *dns.HTTPS:
				noECH(t, v.Value)
			case *dns.SVCB:
				noECH(t, v.Value)
			}
		}
		if links > DefaultMaxCNAME+1 {
			t.Fatalf("%d CNAME links kept", links)
		}
	})
}

func noECH(t *testing.T, kv []dns.SVCBKeyValue) {
	for _, p := range kv {
		if p.Key() == dns.SVCB_ECHCONFIG {
			t.Fatal("ech SvcParam kept")
		}
	}
}

// FuzzIPLiteral holds ipLiteral to netip.ParseAddr of the unbracketed
// host: the shortcut that skips names never skips an address.
func FuzzIPLiteral(f *testing.F) {
	for _, s := range []string{"203.0.113.1", "::1", "[2001:db8::1]", "fe80::1%eth0", "::ffff:1.2.3.4",
		"models.test", "1.2.3.4.", "1e100.net", "", "[]", "0x7f.1", "01.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		want, err := netip.ParseAddr(strings.Trim(host, "[]"))
		got, ok := ipLiteral(host)
		if ok != (err == nil) || got != want {
			t.Fatalf("ipLiteral(%q) = %v, %v; netip.ParseAddr: %v, %v", host, got, ok, want, err)
		}
	})
}
