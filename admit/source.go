package admit

import (
	"net"
	"net/netip"
)

// SourceAddr is the IP of a connection's or datagram's remote address,
// unmapped: what Identify takes. Every listener (the proxy's, the DNS
// server's) reads its source through it; the zero Addr for none.
func SourceAddr(a net.Addr) netip.Addr {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return v.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
