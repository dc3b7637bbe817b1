package dnsserver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/egressd/egressd/resolver"
	"github.com/miekg/dns"
)

// FuzzHandler feeds arbitrary wire bytes to the handler as a pod (and as an
// unknown client) would send them: no panic, and an answer that packs, is
// a response to the same id and fits the UDP bound, or nothing.
func FuzzHandler(f *testing.F) {
	seeds := []func(m *dns.Msg){
		func(m *dns.Msg) { m.SetQuestion("models.test.", dns.TypeA) },
		func(m *dns.Msg) { m.SetQuestion("evil.test.", dns.TypeTXT); m.SetEdns0(4096, true) },
		func(m *dns.Msg) { m.SetQuestion("big.blob.test.", dns.TypeA) },
		func(m *dns.Msg) { m.SetQuestion("models.test.llm-prod.svc.cluster.local.", dns.TypeAAAA) },
		func(m *dns.Msg) { m.SetQuestion("metadata.google.internal.", dns.TypeA) },
		func(m *dns.Msg) { m.SetQuestion("models.test.", dns.TypeANY) },
		func(m *dns.Msg) { m.SetQuestion(".", dns.TypeNS) },
		func(m *dns.Msg) { m.SetQuestion("models.test.", dns.TypeA); m.Response = true },
		func(m *dns.Msg) {
			m.SetQuestion("models.test.", dns.TypeA)
			m.Question = append(m.Question, m.Question[0])
		},
		func(m *dns.Msg) {
			m.SetQuestion("models.test.", dns.TypeA)
			m.SetEdns0(1232, false)
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: ProbeOption, Data: []byte("probe\x00\xff")})
		},
	}
	for _, s := range seeds {
		m := new(dns.Msg)
		s(m)
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true, false)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1}, true, true) // compression loop
	f.Add([]byte{}, false, false)

	fx := newFixture(f, unlimited) // one source: the rate limit would answer most REFUSED
	f.Fuzz(func(t *testing.T, wire []byte, udp, unknown bool) {
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return // miekg answers FORMERR itself (header only) before the handler
		}
		src := netip.MustParseAddr("127.0.0.2")
		if unknown {
			src = netip.MustParseAddr("127.0.0.9")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp := fx.srv.handle(ctx, src, req, udp)
		if resp == nil {
			if !req.Response {
				t.Fatal("a query got no answer")
			}
			return
		}
		b, err := resp.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("answer id %d QR %v to query %d", resp.Id, resp.Response, req.Id)
		}
		if udp && len(b) > int(resolver.DefaultUDPSize) {
			t.Fatalf("UDP answer of %d bytes", len(b))
		}
		if unknown && resp.Rcode != dns.RcodeRefused {
			t.Fatalf("unknown client got %s", dns.RcodeToString[resp.Rcode])
		}
	})
}
