package admit

import (
	"context"
	"errors"
	"net/netip"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// Route is the answer of the steps after Admit: the decision and exactly
// the addresses the caller may dial.
type Route struct {
	// Decision is the admitted decision after the guard: unchanged, a
	// softened refusal (audit mode, would_deny), or a denial (metadata
	// when the name's CNAME chain leads to a metadata name; the guard's
	// reason when every address was refused).
	Decision policy.Decision
	// Addrs are the addresses to dial, in order: unzoned, IPv4-mapped as
	// plain IPv4 (what the guard classified), with the port.
	Addrs []netip.AddrPort
	// Candidates are the addresses the guard was given: the IP literal, or
	// the answer's.
	Candidates []netip.Addr
	// Answer is the lookup's answer, also on failure; Looked says whether
	// there was one (an IP literal is not looked up).
	Answer resolver.Answer
	Looked bool
	// Err is the lookup's failure: an outcome (resolve-failed) while
	// Decision still allows, resolver.ErrMetadataName with the metadata
	// denial. Nil for an IP literal and a lookup that gave addresses;
	// when the guard refused them all, Decision says so.
	Err error
}

// Resolve is the lookup step: an IP literal is its own address; a name is
// looked up once through the Lookuper. It returns the addresses, the answer
// and whether there was a lookup. A lookup that succeeds without an
// address fails with ErrNoAddress.
func (p *Pipeline) Resolve(ctx context.Context, host string) ([]netip.Addr, resolver.Answer, bool, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, resolver.Answer{}, false, nil
	}
	if p.cfg.Resolver == nil {
		return nil, resolver.Answer{}, false, ErrNoResolver
	}
	ans, err := p.cfg.Resolver.LookupIP(ctx, host)
	if err == nil && len(ans.Addrs) == 0 {
		err = ErrNoAddress
	}
	return ans.Addrs, ans, true, err
}

// Check is the guard step: policy.Guard.CheckAll, the only one.
func (p *Pipeline) Check(d policy.Decision, addrs []netip.Addr, port int) (policy.Decision, []netip.AddrPort) {
	return p.cfg.Guard.CheckAll(d, addrs, uint16(port))
}

// Route resolves host and puts every address through the guard for a
// request admitted with d (call it only when d allows). There is no second
// resolution between the check and the caller's dial, so DNS rebinding
// cannot slip an address past the guard.
func (p *Pipeline) Route(ctx context.Context, d policy.Decision, host string, port int) Route {
	addrs, ans, looked, err := p.Resolve(ctx, host)
	r := Route{Decision: d, Candidates: addrs, Answer: ans, Looked: looked}
	switch {
	case errors.Is(err, resolver.ErrMetadataName):
		// The CNAME chain leads to a metadata name: a denial in every
		// mode, never a resolve failure.
		r.Decision, r.Err = policy.Denied(policy.ReasonMetadata), err
		return r
	case err != nil:
		r.Err = err
		return r
	}
	r.Decision, r.Addrs = p.Check(d, addrs, port)
	return r
}
