package admit

import (
	"net"
	"net/netip"
	"testing"
)

// otherAddr is a net.Addr of no known type: read through its String.
type otherAddr string

func (a otherAddr) Network() string { return "other" }
func (a otherAddr) String() string  { return string(a) }

func TestSourceAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    net.Addr
		want netip.Addr
	}{
		{"tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 40000}, netip.MustParseAddr("127.0.0.2")},
		{"tcp, 16-byte v4 unmapped", &net.TCPAddr{IP: net.ParseIP("127.0.0.3").To16(), Port: 1}, netip.MustParseAddr("127.0.0.3")},
		{"udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.4"), Port: 53}, netip.MustParseAddr("127.0.0.4")},
		{"udp v6", &net.UDPAddr{IP: net.ParseIP("::1"), Port: 53}, netip.MustParseAddr("::1")},
		{"v4-mapped text", otherAddr("[::ffff:127.0.0.5]:80"), netip.MustParseAddr("127.0.0.5")},
		{"no port", otherAddr("127.0.0.6"), netip.Addr{}},
		{"nil", nil, netip.Addr{}},
		{"typed nil tcp", (*net.TCPAddr)(nil), netip.Addr{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SourceAddr(tc.a); got != tc.want {
				t.Fatalf("SourceAddr(%v) = %v, want %v", tc.a, got, tc.want)
			}
		})
	}
}
