package identity

import (
	"net/netip"

	"github.com/egressd/egressd/policy"
)

// Source maps a connection's source IP to the pod behind it.
type Source interface {
	// Lookup returns the client for ip, or false when no single live pod
	// holds it (unknown or ambiguous: the caller denies unknown-client).
	// IPv4-mapped IPv6 addresses are unmapped first.
	Lookup(ip netip.Addr) (*policy.Client, bool)
}
