package proxy

import (
	"fmt"
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/resolver"
)

// TestConnectWithRealResolver resolves through the real resolver against an
// in-process DNS server: a CNAME chain, the record's dns field, and the
// cache on the second request.
func TestConnectWithRealResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Name == "models.test." && q.Question[0].Qtype == dns.TypeA {
			cname, _ := dns.NewRR("models.test. 60 IN CNAME edge.cdn.test.")
			a, _ := dns.NewRR("edge.cdn.test. 60 IN A 127.0.0.1")
			m.Answer = append(m.Answer, cname, a)
		} else {
			// NODATA with an SOA, so it is negatively cacheable (RFC 2308 §5).
			soa, _ := dns.NewRR("test. 60 IN SOA ns.test. host.test. 1 60 60 60 60")
			m.Ns = append(m.Ns, soa)
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })

	res, err := resolver.New(resolver.Config{Upstreams: []string{pc.LocalAddr().String()}, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpt{lookup: res})
	for _, tc := range []struct {
		name   string
		cached bool
	}{{"first lookup goes upstream", false}, {"second is cached", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, err := e.tlsGet(c, "models.test", "/w.bin"); err != nil {
				t.Fatal(err)
			}
			c.Close()
			r := e.sink.next(t)
			if r.DNS == nil || len(r.DNS.Answers) != 1 || r.DNS.Answers[0] != "127.0.0.1" || r.DNS.Rcode != "NOERROR" || r.DNS.Cached != tc.cached {
				t.Fatalf("dns %+v", r.DNS)
			}
			if len(r.DNS.CNAMEs) == 0 {
				t.Fatalf("no CNAME chain in %+v", r.DNS)
			}
		})
	}
}
