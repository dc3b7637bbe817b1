package policy

import "net/netip"

// Class is what the guard makes of an address.
type Class int

// Address classes (DESIGN.md, "Addresses: the guard").
const (
	ClassPublic  Class = iota // allowed when the name was allowed
	ClassPrivate              // only inside a rule's cidrs
	ClassNever                // no rule can open it
)

// GuardConfig configures a Guard. The zero value is a guard with the built-in
// classes only.
type GuardConfig struct {
	// ExtraPrivate are ranges treated as private in addition to the built-in
	// ones (the cluster's pod and service CIDRs).
	ExtraPrivate []netip.Prefix
	// Self are egressd's own listening sockets: never dialled. An
	// unspecified address (0.0.0.0:3128) matches that port on any local
	// address the caller lists in SelfAddrs.
	Self []netip.AddrPort
	// SelfAddrs are the machine's own addresses, used with unspecified
	// entries of Self.
	SelfAddrs []netip.Addr
}

// Guard classifies every address egressd is about to dial.
type Guard struct {
	cfg GuardConfig
}

// NewGuard returns a guard for cfg.
func NewGuard(cfg GuardConfig) *Guard { return &Guard{cfg: cfg} }

// Permit reports whether the request decided by d may dial ap, and if not,
// the reason naming the class that refused. It is the last check before a
// dial; the caller dials exactly ap.
func (g *Guard) Permit(d Decision, ap netip.AddrPort) (bool, Reason) {
	panicTODO()
	return false, ReasonPrivate
}

// Classify returns the built-in class of a and the reason that class gives
// for a denial (ReasonAllowed for public). IPv4 embedded in IPv6 (mapped,
// compatible, NAT64, 6to4, Teredo) is classified by its IPv4 part.
func Classify(a netip.Addr) (Class, Reason) {
	panicTODO()
	return ClassNever, ReasonReserved
}

// IsMetadataName reports whether a normalized host name is a cloud metadata
// name, denied before any lookup.
func IsMetadataName(host string) bool {
	panicTODO()
	return true
}

func panicTODO() {}
