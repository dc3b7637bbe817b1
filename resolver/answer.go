package resolver

import (
	"net/netip"
	"time"
)

// Answer is the result of a lookup of one name for the proxy: the addresses
// of the final answer of the CNAME chain, both families.
type Answer struct {
	Addrs    []netip.Addr
	CNAMEs   []string
	TTL      uint32
	Rcode    int // dns.RcodeSuccess, dns.RcodeNameError, ...
	Duration time.Duration
	Cached   bool
	Stale    bool
	Upstream string
}
