package admit

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzParseReverse: a name parseReverse accepts is exactly the PTR name of
// the address it returns (RFC 1035 §3.5, RFC 3596 §2.5); nothing with
// extra labels gets through.
func FuzzParseReverse(f *testing.F) {
	for _, s := range []string{
		"2.0.0.127.in-addr.arpa", "x.2.0.0.127.in-addr.arpa", "0.127.in-addr.arpa", "02.0.0.127.in-addr.arpa",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa", "in-addr.arpa", "ip6.arpa", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, ok := parseReverse(host)
		if !ok {
			return
		}
		want, err := dns.ReverseAddr(a.String())
		if err != nil || want != host+"." {
			t.Fatalf("%q parsed as %s, whose PTR name is %q", host, a, want)
		}
	})
}
