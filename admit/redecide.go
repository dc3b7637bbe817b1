package admit

import (
	"net/netip"

	"github.com/egressd/egressd/policy"
)

// Redecide is revocation's admission of an open connection from src to
// host:port (host already normalized), dialled at peer (when valid), made
// again against snap and today's identities: Identify, Decide, and the
// guard on the dialled address. The caller folds the answer into the
// decision in force with policy.Decision.Then.
func (p *Pipeline) Redecide(snap *policy.Snapshot, src netip.Addr, host string, port int, peer netip.AddrPort) policy.Decision {
	c := p.Identify(src)
	if c == nil {
		return policy.Denied(policy.ReasonUnknownClient)
	}
	d := p.decide(snap, c, host, port)
	if d.Allowed() && peer.IsValid() {
		// Admission's guard step on the one dialled address, its answer
		// into a buffer on the stack: a pass decides every open
		// connection again and must not allocate for each.
		var buf [1]netip.AddrPort
		addr := [1]netip.Addr{peer.Addr()}
		d, _ = p.cfg.Guard.AppendCheckAll(buf[:0], d, addr[:], peer.Port())
	}
	return d
}
