package policy

import (
	"net/netip"
	"strings"
)

// Class is what the guard makes of an address.
type Class int

// Address classes (docs/design.md, "Addresses: the guard").
const (
	ClassPublic  Class = iota // allowed when the name was allowed
	ClassPrivate              // only inside a rule's cidrs
	ClassNever                // no rule can open it
)

// String returns "public", "private" or "never".
func (c Class) String() string {
	switch c {
	case ClassPublic:
		return "public"
	case ClassPrivate:
		return "private"
	case ClassNever:
		return "never"
	}
	return "unknown"
}

// GuardConfig configures a Guard. The zero value is a guard with the built-in
// classes only.
type GuardConfig struct {
	// ExtraPrivate are ranges treated as private in addition to the built-in
	// ones (the cluster's pod and service CIDRs). Nil means none.
	ExtraPrivate []netip.Prefix
	// Self are egressd's own listening sockets: never dialled. An
	// unspecified address (0.0.0.0:3128) matches that port on any local
	// address the caller lists in SelfAddrs. Nil means none.
	Self []netip.AddrPort
	// SelfAddrs are the machine's own addresses, used with unspecified
	// entries of Self; loopback addresses always count. Nil means loopback
	// only.
	SelfAddrs []netip.Addr
}

// Guard classifies every address egressd is about to dial. It is immutable
// and safe for concurrent use; the zero value and nil use the built-in
// classes only.
type Guard struct {
	cfg GuardConfig
}

// NewGuard returns a guard for cfg. Addresses in cfg are unmapped and
// unzoned once here, so that Permit compares like with like.
func NewGuard(cfg GuardConfig) *Guard {
	c := GuardConfig{
		ExtraPrivate: append([]netip.Prefix(nil), cfg.ExtraPrivate...),
		Self:         make([]netip.AddrPort, 0, len(cfg.Self)),
		SelfAddrs:    make([]netip.Addr, 0, len(cfg.SelfAddrs)),
	}
	for _, ap := range cfg.Self {
		c.Self = append(c.Self, netip.AddrPortFrom(plain(ap.Addr()), ap.Port()))
	}
	for _, a := range cfg.SelfAddrs {
		c.SelfAddrs = append(c.SelfAddrs, plain(a))
	}
	for i, p := range c.ExtraPrivate {
		c.ExtraPrivate[i] = p.Masked()
	}
	return &Guard{cfg: c}
}

// plain drops a zone and unmaps an IPv4-mapped address.
func plain(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

// Permit reports whether the request decided by d may dial ap, and if not,
// the reason naming the class that refused. It is the last check before a
// dial; the caller dials exactly ap.
//
// Order: a denied decision stays denied; the never class (metadata,
// link-local, reserved); egressd's own listeners (self); private addresses,
// built-in or ExtraPrivate, only inside one of d.CIDRs; public addresses.
// Audit mode does not reach here softened for never: Decide keeps those
// denials, and the guard's own never answer does not depend on d.
func (g *Guard) Permit(d Decision, ap netip.AddrPort) (bool, Reason) {
	_, ok, reason := g.permit(d, ap)
	return ok, reason
}

// permit is Permit, with the address's class.
func (g *Guard) permit(d Decision, ap netip.AddrPort) (Class, bool, Reason) {
	a := plain(ap.Addr())
	class, reason := Classify(a)
	if class == ClassNever {
		return class, false, reason
	}
	if !d.Allowed() {
		return class, false, d.Reason
	}
	if g != nil && g.isSelf(a, ap.Port()) {
		return class, false, ReasonSelf
	}
	if class == ClassPublic && (g == nil || !containsAny(g.cfg.ExtraPrivate, a)) {
		return class, true, ReasonAllowed
	}
	if inCIDRs(d.CIDRs, a) {
		return class, true, ReasonAllowed
	}
	return class, false, ReasonPrivate
}

// check is the guard's answer for one candidate address ap (unzoned,
// unmapped) of a request decided by d: what Explain shows of it, and the
// decision for dialling it: d itself when Permit allows it, else d.Deny
// with the refusing class's reason (softened in audit mode unless the class
// is never).
func (g *Guard) check(d Decision, ap netip.AddrPort) (AddrCheck, Decision) {
	class, ok, reason := g.permit(d, ap)
	ac := AddrCheck{Addr: ap.Addr(), Class: class, Permitted: ok}
	if ok {
		return ac, d
	}
	c := d.Deny(reason)
	if reason.Never() {
		c = Denied(reason)
	}
	ac.Reason, ac.Permitted, ac.Softened = reason, c.Allowed(), c.Allowed()
	return ac, c
}

// CheckAll is the guard step: it puts every candidate address of a
// request decided by d through the guard and returns the decision for the
// request and the addresses that may be dialled, in order (unzoned,
// IPv4-mapped as plain IPv4, with port). With none permitted, the decision
// is the first refusal, or the first refusal of the never class when there
// is one (the one that audit mode cannot soften). With some permitted, it
// is d, or the first softened refusal when audit mode let a refused
// address through (the record says would_deny). With no addrs it returns d
// and none: the request failed to resolve, an outcome of the caller's, not
// a decision.
func (g *Guard) CheckAll(d Decision, addrs []netip.Addr, port uint16) (Decision, []netip.AddrPort) {
	if len(addrs) == 0 {
		return d, nil
	}
	dec, permitted := g.checkAll(make([]netip.AddrPort, 0, len(addrs)), nil, d, addrs, port)
	if len(permitted) == 0 {
		return dec, nil
	}
	return dec, permitted
}

// AppendCheckAll is CheckAll appending the permitted addresses to dst (as
// strconv.AppendInt does), for a caller that holds a buffer: revocation
// checks each open connection's one dialled address with a buffer on its
// stack, so that a pass does not allocate for each.
func (g *Guard) AppendCheckAll(dst []netip.AddrPort, d Decision, addrs []netip.Addr, port uint16) (Decision, []netip.AddrPort) {
	return g.checkAll(dst, nil, d, addrs, port)
}

// checkAll is the one loop of the guard step (CheckAll, AppendCheckAll,
// Explain): every address through check, the permitted appended to dst,
// each address's AddrCheck to *out when out is not nil, and the decision
// of them all.
func (g *Guard) checkAll(dst []netip.AddrPort, out *[]AddrCheck, d Decision, addrs []netip.Addr, port uint16) (Decision, []netip.AddrPort) {
	var refused Decision
	kept, permitted := d, false
	for _, a := range addrs {
		ap := netip.AddrPortFrom(plain(a), port)
		ac, c := g.check(d, ap)
		if out != nil {
			*out = append(*out, ac)
		}
		if !c.Allowed() {
			refused = FirstRefusal(refused, c)
			continue
		}
		kept, permitted = kept.Then(c), true
		dst = append(dst, ap)
	}
	if !permitted && len(addrs) > 0 {
		return refused, dst
	}
	return kept, dst
}

// FirstRefusal returns the refusal a request refused for several addresses
// at once records, when refused is the one so far (the zero Decision when
// none) and next another: the first, unless next is of the never class and
// refused is not (the one no mode softens wins). The guard (CheckAll) and
// the DNS server's answer filter share it.
func FirstRefusal(refused, next Decision) Decision {
	if refused.Reason == "" || next.Reason.Never() && !refused.Reason.Never() {
		return next
	}
	return refused
}

// AddrCheck is the guard's answer for one candidate address, for `egressd
// explain`.
type AddrCheck struct {
	Addr  netip.Addr `json:"addr"`
	Class Class      `json:"class"`
	// Reason is why the guard refuses the address (metadata, link-local,
	// private-address, self...), empty when it does not. Permitted: the
	// request may dial it, Softened when only audit mode lets it through.
	// For a denied decision nothing is dialled: Reason is the class's
	// alone.
	Reason    Reason `json:"reason,omitempty"`
	Permitted bool   `json:"permitted"`
	Softened  bool   `json:"softened,omitempty"`
}

// Explain returns the guard's answer for each address, and the decision
// CheckAll makes of them all, from CheckAll's own loop.
func (g *Guard) Explain(d Decision, addrs []netip.Addr, port uint16) ([]AddrCheck, Decision) {
	if !d.Allowed() {
		final, _ := g.CheckAll(d, addrs, port)
		return Classes(addrs), final
	}
	out := make([]AddrCheck, 0, len(addrs))
	final, _ := g.checkAll(nil, &out, d, addrs, port)
	return out, final
}

// Classes returns each address's class (unzoned, IPv4-mapped as plain
// IPv4), with its reason when it is not public: what is shown of addresses
// nothing is dialled for (a denied request's, a DNS answer's).
func Classes(addrs []netip.Addr) []AddrCheck {
	out := make([]AddrCheck, 0, len(addrs))
	for _, a := range addrs {
		a = plain(a)
		class, reason := Classify(a)
		ac := AddrCheck{Addr: a, Class: class}
		if class != ClassPublic {
			ac.Reason = reason
		}
		out = append(out, ac)
	}
	return out
}

// MarshalText writes the class name, so that JSON shows "private".
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// inCIDRs reports whether a rule's cidrs hold a, or the IPv4 address a
// embeds (a NAT64 address reaches that IPv4 peer).
func inCIDRs(cidrs []netip.Prefix, a netip.Addr) bool {
	if containsAny(cidrs, a) {
		return true
	}
	v4, ok := embeddedV4(a)
	return ok && containsAny(cidrs, v4)
}

func (g *Guard) isSelf(a netip.Addr, port uint16) bool {
	for _, s := range g.cfg.Self {
		if s.Port() != port {
			continue
		}
		if s.Addr() == a {
			return true
		}
		if s.Addr().IsUnspecified() || !s.Addr().IsValid() {
			if a.IsLoopback() {
				return true
			}
			for _, l := range g.cfg.SelfAddrs {
				if l == a {
					return true
				}
			}
		}
	}
	return false
}

// metadataNames are the cloud metadata host names, denied by name before
// any lookup (GCP: metadata.google.internal, metadata.goog and the bare
// "metadata" a search list completes; AWS: instance-data,
// instance-data.ec2.internal).
var metadataNames = [...]string{
	"metadata.google.internal",
	"metadata.goog",
	"metadata",
	"instance-data",
	"instance-data.ec2.internal",
}

// IsMetadataName reports whether a normalized host name is a cloud metadata
// name, denied before any lookup. One trailing dot and upper case are
// tolerated, so that a caller that skipped normalization still fails closed.
func IsMetadataName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	for _, n := range metadataNames {
		if strings.EqualFold(host, n) {
			return true
		}
	}
	return false
}
