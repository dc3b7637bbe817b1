package probe

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeResolver answers on 127.0.0.1 (UDP and TCP, one port) as egressd's
// resolver would, by query name, and remembers the probe option per
// transport.
type fakeResolver struct {
	addr string
	mu   sync.Mutex
	seen map[string]string // "net qname" → EDNS0 local option value
}

func startFakeResolver(t *testing.T) *fakeResolver {
	t.Helper()
	fr := &fakeResolver{seen: map[string]string{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fr.addr = pc.LocalAddr().String()
	ln, err := net.Listen("tcp", fr.addr)
	if err != nil {
		t.Fatal(err)
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		netw := w.LocalAddr().Network()
		name := q.Question[0].Name
		if opt := q.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if l, ok := o.(*dns.EDNS0_LOCAL); ok && l.Code == EDNSOptionCode {
					fr.mu.Lock()
					fr.seen[netw+" "+name] = string(l.Data)
					fr.mu.Unlock()
				}
			}
		}
		m := new(dns.Msg)
		m.SetReply(q)
		a := func(ip string) dns.RR {
			return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(ip)}
		}
		ede := func(code uint16, text string) {
			m.SetEdns0(1232, false)
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: code, ExtraText: text})
		}
		switch name {
		case "allow.test.":
			m.Answer = append(m.Answer, a("192.0.2.1"), a("192.0.2.2"))
		case "nodata.test.":
		case "deny.test.":
			m.Rcode = dns.RcodeNameError
			ede(dns.ExtendedErrorCodeBlocked, "egressd: not-allowlisted")
		case "missing.test.":
			m.Rcode = dns.RcodeNameError
		case "otherblock.test.":
			m.Rcode = dns.RcodeNameError
			ede(dns.ExtendedErrorCodeBlocked, "blocked by a filter")
		case "fail.test.":
			m.Rcode = dns.RcodeServerFailure
			ede(dns.ExtendedErrorCodeNetworkError, "egressd: upstream failed")
		case "refused.test.":
			m.Rcode = dns.RcodeRefused
			ede(dns.ExtendedErrorCodeProhibited, "egressd: unknown-client")
		case "formerr.test.":
			m.Rcode = dns.RcodeFormatError
		case "big.test.":
			// Truncated over UDP, whole over TCP (RFC 7766).
			if netw == "udp" {
				m.Truncated = true
			} else {
				for i := 1; i <= 40; i++ {
					m.Answer = append(m.Answer, a(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String()))
				}
			}
		case "hang.test.":
			return
		}
		_ = w.WriteMsg(m)
	})
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	tcp := &dns.Server{Listener: ln, Handler: handler}
	for _, s := range []*dns.Server{udp, tcp} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return fr
}

func (fr *fakeResolver) option(netw, name string) (string, bool) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	v, ok := fr.seen[netw+" "+dns.Fqdn(name)]
	return v, ok
}

func TestQuery(t *testing.T) {
	fr := startFakeResolver(t)
	r := newRunner(t, Config{Proxy: "127.0.0.1:1", DNS: fr.addr, Timeout: 2 * time.Second})
	short := newRunner(t, Config{Proxy: "127.0.0.1:1", DNS: fr.addr, Timeout: 200 * time.Millisecond})
	cases := []struct {
		name     string
		check    Check
		observed Observed
		reason   string
		status   string
		pass     bool
		why      string
	}{
		{"NOERROR with answers", Check{Host: "allow.test", Expect: ExpectAllow}, Allowed, "", "NOERROR", true, ""},
		{"NOERROR without answers", Check{Host: "nodata.test", Expect: ExpectAllow}, Allowed, "", "NOERROR", true, ""},
		{"NOERROR, want denied", Check{Host: "allow.test", Expect: ExpectDeny, Reason: "metadata"}, Allowed, "", "NOERROR", false, "allowed by policy, want denied (metadata)"},
		{"NXDOMAIN + EDE 15", Check{Host: "deny.test", Expect: ExpectDeny, Reason: "not-allowlisted"}, Denied, "not-allowlisted", "NXDOMAIN", true, ""},
		{"NXDOMAIN + EDE 15, other reason", Check{Host: "deny.test", Expect: ExpectDeny, Reason: "metadata"}, Denied, "not-allowlisted", "NXDOMAIN", false, "want metadata"},
		{"NXDOMAIN + EDE 15, want allowed", Check{Host: "deny.test", Expect: ExpectAllow}, Denied, "not-allowlisted", "NXDOMAIN", false, "want allowed"},
		{"NXDOMAIN from upstream meets allow", Check{Host: "missing.test", Expect: ExpectAllow}, UpstreamFailed, "", "NXDOMAIN", true, "NXDOMAIN from upstream"},
		{"NXDOMAIN from upstream is no denial", Check{Host: "missing.test", Expect: ExpectDeny}, UpstreamFailed, "", "NXDOMAIN", false, "want denied"},
		{"someone else's block is no denial", Check{Host: "otherblock.test", Expect: ExpectDeny}, UpstreamFailed, "", "NXDOMAIN", false, "want denied"},
		{"SERVFAIL meets allow", Check{Host: "fail.test", Expect: ExpectAllow}, UpstreamFailed, "", "SERVFAIL", true, "SERVFAIL EDE 23"},
		{"REFUSED + EDE 18: unknown client", Check{Host: "refused.test", Expect: ExpectDeny, Reason: "unknown-client"}, Denied, "unknown-client", "REFUSED", true, ""},
		{"FORMERR: no decision", Check{Host: "formerr.test", Expect: ExpectDeny}, NoDecision, "", "FORMERR", false, "no decision seen"},
		{"truncated: again over TCP", Check{Host: "big.test", Expect: ExpectAllow}, Allowed, "", "NOERROR", true, ""},
		{"no answer: timed out", Check{Host: "hang.test", Expect: ExpectDeny}, NoDecision, "", "", false, "timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check.Name = "probe:" + tc.check.Host
			tc.check.Port = 443
			r := r
			if tc.check.Host == "hang.test" {
				r = short
			}
			res := r.runStep(context.Background(), step{tc.check, ViaDNS})
			checkResult(t, res, tc.observed, tc.reason, tc.status, tc.pass, tc.why)
			if tc.check.Host == "hang.test" {
				return
			}
			if v, ok := fr.option("udp", tc.check.Host); !ok || v != tc.check.Name {
				t.Errorf("EDNS0 option %d over UDP = %q (%v), want %q", EDNSOptionCode, v, ok, tc.check.Name)
			}
		})
	}
	t.Run("TCP carries the option too", func(t *testing.T) {
		if v, ok := fr.option("tcp", "big.test"); !ok || v != "probe:big.test" {
			t.Errorf("option over TCP = %q (%v)", v, ok)
		}
		if _, ok := fr.option("tcp", "allow.test"); ok {
			t.Error("an answer that fit UDP was asked again over TCP")
		}
	})
	t.Run("answers counted", func(t *testing.T) {
		res := r.runStep(context.Background(), step{Check{Name: "n", Host: "big.test", Expect: ExpectAllow}, ViaDNS})
		if res.Detail != "40 answers" {
			t.Errorf("detail %q, want 40 answers", res.Detail)
		}
	})
}

func TestDirect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Close() })
	accepted := make(chan string, 4)
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	openPort := open.Addr().(*net.TCPAddr).Port
	// Names resolve through a real DNS server on 127.0.0.1: bypass.test
	// to 127.0.0.1, anything else NXDOMAIN.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Name == "bypass.test." && q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "bypass.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(127, 0, 0, 1)})
		} else if q.Question[0].Name != "bypass.test." {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	r := newRunner(t, Config{Proxy: "127.0.0.1:1", Resolver: resolver, Source: netip.MustParseAddr("127.0.0.2"), Timeout: 2 * time.Second})
	cases := []struct {
		name     string
		host     string
		port     int
		observed Observed
		pass     bool
		why      string
	}{
		{"closed port: blocked", "127.0.0.1", closed, Blocked, true, ""},
		{"listening port: bypass", "127.0.0.1", openPort, Connected, false, "bypass"},
		{"a name is resolved, then dialled", "bypass.test", openPort, Connected, false, "bypass"},
		{"an unresolvable name proves nothing", "nowhere.test", openPort, NoDecision, false, "could not test the bypass: resolve nowhere.test"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.runStep(context.Background(), step{Check{Name: "d", Host: tc.host, Port: tc.port, Expect: ExpectDeny}, ViaDirect})
			if res.Observed != tc.observed || res.Pass != tc.pass || !strings.Contains(res.Why, tc.why) {
				t.Errorf("got %s pass %v why %q (%s), want %s pass %v why %q", res.Observed, res.Pass, res.Why, res.Detail, tc.observed, tc.pass, tc.why)
			}
			if tc.observed == Connected {
				if from := <-accepted; !strings.HasPrefix(from, "127.0.0.2:") {
					t.Errorf("connected from %s, want 127.0.0.2", from)
				}
			}
		})
	}
}
