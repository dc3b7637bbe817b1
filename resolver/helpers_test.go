package resolver

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/metrics"
)

func newTestResolver(t testing.TB, cfg Config) *Resolver {
	t.Helper()
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// answerAddrs returns the A and AAAA addresses of m's answer, in order.
func answerAddrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(v.A.To4())
			out = append(out, a.String())
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(v.AAAA.To16())
			out = append(out, a.String())
		}
	}
	return out
}
