package dnsserver

// Adversarial tests: a pod (or a spoofed source) uses the DNS server to
// learn a way past the proxy, or to turn egressd into an amplifier. Each
// row names the attack and fails when it works.

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
)

// TestAdversarialAnswers: the authoritative DNS of an allowed name (under
// **.blob.test) is the attacker's. No never-class address reaches the pod,
// in any section or SVCB hint.
func TestAdversarialAnswers(t *testing.T) {
	f := newFixture(t, nil)
	for k, rrs := range map[string][]string{
		"mapped.blob.test./AAAA":    {"mapped.blob.test. 60 IN AAAA ::ffff:169.254.169.254"},
		"nat64.blob.test./AAAA":     {"nat64.blob.test. 60 IN AAAA 64:ff9b::a9fe:a9fe"},
		"sixtofour.blob.test./AAAA": {"sixtofour.blob.test. 60 IN AAAA 2002:a9fe:a9fe::1"},
		"teredo.blob.test./AAAA":    {"teredo.blob.test. 60 IN AAAA 2001:0:4136:e378:8000:63bf:5601:5601"},
		"imds6.blob.test./AAAA":     {"imds6.blob.test. 60 IN AAAA fd00:ec2::254"},
		"mixed6.blob.test./AAAA":    {"mixed6.blob.test. 60 IN AAAA fe80::1", "mixed6.blob.test. 60 IN AAAA 2001:db8::5"},
		"cname-meta.blob.test./A":   {"cname-meta.blob.test. 60 IN CNAME metadata.google.internal.", "metadata.google.internal. 60 IN A 169.254.169.254"},
		"cname-ll.blob.test./A":     {"cname-ll.blob.test. 60 IN CNAME x.attacker.example.", "x.attacker.example. 60 IN A 169.254.9.9"},
		"azure.blob.test./A":        {"azure.blob.test. 60 IN A 168.63.129.16"},
		"hints.blob.test./HTTPS":    {`hints.blob.test. 60 IN HTTPS 1 . alpn="h2" ipv4hint="169.254.169.254,203.0.113.9" ipv6hint="fd00:ec2::254"`},
		"svcb.blob.test./SVCB":      {`svcb.blob.test. 60 IN SVCB 1 svc.blob.test. ipv4hint="100.100.100.200"`},
	} {
		f.up.Set(k, rrs...)
	}
	for _, tc := range []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers []string // addresses left; nil: none
		reason  policy.Reason
	}{
		{"AAAA IPv4-mapped metadata", "mapped.blob.test", dns.TypeAAAA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"AAAA NAT64 metadata", "nat64.blob.test", dns.TypeAAAA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"AAAA 6to4 metadata", "sixtofour.blob.test", dns.TypeAAAA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"AAAA Teredo metadata", "teredo.blob.test", dns.TypeAAAA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"AAAA AWS IMDS over IPv6", "imds6.blob.test", dns.TypeAAAA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"AAAA link-local stripped, private kept", "mixed6.blob.test", dns.TypeAAAA, dns.RcodeSuccess, []string{"2001:db8::5"}, policy.ReasonAllowed},
		{"CNAME to a metadata name", "cname-meta.blob.test", dns.TypeA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"CNAME chain into 169.254/16", "cname-ll.blob.test", dns.TypeA, dns.RcodeNameError, nil, policy.ReasonLinkLocal},
		{"Azure WireServer, a public address", "azure.blob.test", dns.TypeA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"HTTPS hints to metadata are stripped", "hints.blob.test", dns.TypeHTTPS, dns.RcodeSuccess, []string{"203.0.113.9"}, policy.ReasonAllowed},
		{"SVCB hint to Alibaba metadata is stripped", "svcb.blob.test", dns.TypeSVCB, dns.RcodeSuccess, nil, policy.ReasonAllowed},
		{"metadata name in mixed case", "MetaData.Google.Internal", dns.TypeA, dns.RcodeNameError, nil, policy.ReasonMetadata},
		{"metadata name with an escaped dot", `metadata\.google.internal`, dns.TypeA, dns.RcodeNameError, nil, policy.ReasonInvalidHost},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				resp := f.ask(t, "127.0.0.2", network, tc.qname, tc.qtype, 1232)
				if resp.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
				}
				var got []string
				for _, rr := range append(append(append([]dns.RR(nil), resp.Answer...), resp.Ns...), resp.Extra...) {
					if a, ok := addrOfRR(rr); ok {
						got = append(got, a.String())
					}
					var kv []dns.SVCBKeyValue
					switch v := rr.(type) {
					case *dns.HTTPS:
						kv = v.Value
					case *dns.SVCB:
						kv = v.Value
					}
					for _, p := range kv {
						switch h := p.(type) {
						case *dns.SVCBIPv4Hint:
							for _, ip := range h.Hint {
								got = append(got, ip.String())
							}
						case *dns.SVCBIPv6Hint:
							for _, ip := range h.Hint {
								got = append(got, ip.String())
							}
						}
					}
				}
				if !slices.Equal(got, tc.answers) {
					t.Fatalf("addresses in the answer %v, want %v", got, tc.answers)
				}
				if tc.qtype == dns.TypeHTTPS || tc.qtype == dns.TypeSVCB {
					if len(resp.Answer) != 1 {
						t.Fatalf("the record itself must stay: %v", resp.Answer)
					}
				}
				rec := f.audit.last(t, strings.ToLower(tc.qname))
				if rec.Reason != string(tc.reason) {
					t.Fatalf("audit reason %q, want %q", rec.Reason, tc.reason)
				}
			})
		}
	}

	t.Run("authority section carries no never-class address", func(t *testing.T) {
		f.up.Set("glue.blob.test./A", "glue.blob.test. 60 IN A 203.0.113.7")
		// The fake upstream puts answers only in Answer; feed an authority
		// record through the cache path by hand.
		res, err := f.res.Query(t.Context(), "glue.blob.test.", dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		res.Msg.Ns = append(res.Msg.Ns, mustRR("glue.blob.test. 60 IN A 169.254.169.254"))
		if out := withoutNever(res.Msg.Ns); len(out) != 0 {
			t.Fatalf("authority kept %v", out)
		}
	})

	t.Run("TTL 0 rebinding: each answer is checked when it is given", func(t *testing.T) {
		set := func(a string) {
			f.up.Set("rebind.blob.test./A", "rebind.blob.test. 0 IN A "+a)
		}
		set("203.0.113.50")
		if resp := f.ask(t, "127.0.0.2", "udp", "rebind.blob.test", dns.TypeA, 1232); resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []string{"203.0.113.50"}) {
			t.Fatalf("first answer %v", resp)
		}
		set("169.254.169.254")
		resp := f.ask(t, "127.0.0.2", "udp", "rebind.blob.test", dns.TypeA, 1232)
		if resp.Rcode != dns.RcodeNameError || len(answerAddrs(resp)) != 0 {
			t.Fatalf("rebound answer %v", resp)
		}
		if n := f.up.Count("rebind.blob.test.", "A", "udp"); n != 2 {
			t.Fatalf("TTL 0 answer cached: %d upstream queries", n)
		}
	})

	t.Run("cluster DNS pointing a service at the metadata address", func(t *testing.T) {
		f.cluster.Set("meta.llm-prod.svc.cluster.local./A", "meta.llm-prod.svc.cluster.local. 5 IN A 169.254.169.254")
		resp := f.ask(t, "127.0.0.2", "udp", "meta.llm-prod.svc.cluster.local", dns.TypeA, 1232)
		if len(answerAddrs(resp)) != 0 {
			t.Fatalf("cluster answer kept %v", answerAddrs(resp))
		}
	})
}

// rawUDP sends b from src to addr and returns the reply's bytes.
func rawUDP(t *testing.T, src, addr string, b []byte) []byte {
	t.Helper()
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang guard only
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestAdversarialUnknownSource: a source that is no pod (over UDP possibly
// a spoofed victim) gets REFUSED, no larger than what it sent, and nothing
// is asked upstream for it.
func TestAdversarialUnknownSource(t *testing.T) {
	f := newFixture(t, nil)
	q := func(name string, qtype uint16, edns bool, opts ...dns.EDNS0) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if edns {
			m.SetEdns0(4096, true)
			o := m.IsEdns0()
			o.Option = append(o.Option, opts...)
		}
		return m
	}
	many := q("models.test.", dns.TypeA, true)
	for i := range 20 {
		many.Question = append(many.Question, dns.Question{Name: strings.Repeat("a", i+1) + ".test.", Qtype: dns.TypeTXT, Qclass: dns.ClassINET})
	}
	for _, tc := range []struct {
		name string
		msg  *dns.Msg
	}{
		{"short name with EDNS0 (the EDE text would double it)", q("a.", dns.TypeA, true)},
		{"allowed name with EDNS0", q("models.test.", dns.TypeA, true)},
		{"without EDNS0", q("models.test.", dns.TypeA, false)},
		{"with a cookie", q("models.test.", dns.TypeA, true, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})},
		{"ANY", q("models.test.", dns.TypeANY, true)},
		{"TXT of a big name", q("big.blob.test.", dns.TypeTXT, true)},
		{"many questions", many},
		{"CHAOS version.bind", func() *dns.Msg {
			m := q("version.bind.", dns.TypeTXT, true)
			m.Question[0].Qclass = dns.ClassCHAOS
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.Total.Load()
			wire, err := tc.msg.Pack()
			if err != nil {
				t.Fatal(err)
			}
			reply := rawUDP(t, "127.0.0.9", f.addr, wire)
			if len(reply) > len(wire) {
				t.Fatalf("reply of %d bytes to a query of %d: an amplifier", len(reply), len(wire))
			}
			m := new(dns.Msg)
			if err := m.Unpack(reply); err != nil {
				t.Fatal(err)
			}
			if m.Rcode != dns.RcodeRefused || len(m.Answer)+len(m.Ns) != 0 || m.RecursionAvailable {
				t.Fatalf("reply %v", m)
			}
			if f.up.Total.Load() != before {
				t.Fatal("asked upstream for an unknown source")
			}
		})
	}
	t.Run("over TCP the EDE text is kept", func(t *testing.T) {
		resp := f.exchange(t, "127.0.0.9", "tcp", q("a.", dns.TypeA, true))
		if e := ede(resp); resp.Rcode != dns.RcodeRefused || e == nil || e.InfoCode != dns.ExtendedErrorCodeProhibited || e.ExtraText == "" {
			t.Fatalf("reply %v", resp)
		}
	})
}

// TestAdversarialMessages: malformed and oversized queries from a pod.
func TestAdversarialMessages(t *testing.T) {
	f := newFixture(t, nil)
	many := new(dns.Msg)
	many.SetQuestion("models.test.", dns.TypeA)
	many.Question = append(many.Question, dns.Question{Name: "evil.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	huge := new(dns.Msg)
	huge.SetQuestion("models.test.", dns.TypeA)
	for range 200 {
		huge.Extra = append(huge.Extra, mustRR(strings.Repeat("x", 60)+".test. 60 IN TXT \""+strings.Repeat("y", 200)+"\""))
	}
	for _, tc := range []struct {
		name    string
		network string
		msg     *dns.Msg
		rcode   int
	}{
		{"two questions: the second one is a denied name", "udp", many, dns.RcodeFormatError},
		{"two questions over TCP", "tcp", many, dns.RcodeFormatError},
		{"a 55 KiB TCP message of additional records", "tcp", huge, dns.RcodeSuccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.Count("evil.test.", "A", "udp")
			resp := f.exchange(t, "127.0.0.2", tc.network, tc.msg)
			if resp.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
			}
			if f.up.Count("evil.test.", "A", "udp") != before {
				t.Fatal("a denied name reached the upstream")
			}
		})
	}
}
