package dnsserver

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkHandleCached is the per-query cost of a warm-cache allowed
// query, without the network: identity, policy, cache, answer, audit record
// (to an in-memory sink) and metrics.
func BenchmarkHandleCached(b *testing.B) {
	f := newFixture(b, nil)
	src := netip.MustParseAddr("127.0.0.2")
	req := new(dns.Msg)
	req.SetQuestion("models.test.", dns.TypeA)
	req.SetEdns0(1232, false)
	ctx := context.Background()
	f.srv.handle(ctx, src, req, true)
	b.ReportAllocs()
	for b.Loop() {
		f.audit.Reset()
		if resp := f.srv.handle(ctx, src, req, true); len(resp.Answer) != 1 {
			b.Fatal(resp)
		}
	}
}

// BenchmarkHandleDenied is the cost of a denied name (NXDOMAIN + EDE).
func BenchmarkHandleDenied(b *testing.B) {
	f := newFixture(b, nil)
	src := netip.MustParseAddr("127.0.0.2")
	req := new(dns.Msg)
	req.SetQuestion("evil.test.", dns.TypeA)
	req.SetEdns0(1232, false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f.audit.Reset()
		if resp := f.srv.handle(ctx, src, req, true); resp.Rcode != dns.RcodeNameError {
			b.Fatal(resp)
		}
	}
}
