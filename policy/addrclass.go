package policy

import "net/netip"

// The address tables of the guard (docs/design.md "Addresses: the guard"),
// drawn from the IANA IPv4 and IPv6 Special-Purpose Address Registries
// (RFC 6890 and its updates).

// metadataAddrs are cloud metadata and platform endpoints: never dialled,
// whatever a rule says.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack IMDS
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity agent
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity agent over IPv6
	netip.MustParseAddr("fd20:ce::254"),    // GCP metadata over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud metadata
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer: a public address
}

// linkLocal prefixes: never (RFC 3927, RFC 4291 §2.5.6).
var linkLocal = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
}

// multicast prefixes: never (RFC 5771, RFC 4291 §2.7).
var multicast = []netip.Prefix{
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("ff00::/8"),
}

// broadcast is the limited broadcast address (RFC 919): never.
var broadcast = netip.MustParseAddr("255.255.255.255")

// privatePrefixes are non-public ranges: reachable only inside a rule's
// cidrs. Loopback is here, not in never: a rule may name 127.0.0.0/8 on
// purpose (a sidecar), and egressd's own listeners are refused as "self".
var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", RFC 791
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT shared space, RFC 6598
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback, RFC 1122
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments, RFC 6890
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1, RFC 5737
	netip.MustParsePrefix("192.88.99.0/24"),  // deprecated 6to4 relay anycast, RFC 7526
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking, RFC 2544
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2, RFC 5737
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3, RFC 5737
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, RFC 1112
	netip.MustParsePrefix("::/8"),            // loopback ::1 and the rest of the reserved ::/8, RFC 4291
	netip.MustParsePrefix("100::/64"),        // discard-only, RFC 6666
	netip.MustParsePrefix("100:0:0:1::/64"),  // dummy prefix, RFC 9780
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, RFC 2928
	netip.MustParsePrefix("2001:db8::/32"),   // documentation, RFC 3849
	netip.MustParsePrefix("3fff::/20"),       // documentation, RFC 9637
	netip.MustParsePrefix("5f00::/16"),       // SRv6 SIDs, RFC 9602
	netip.MustParsePrefix("fc00::/7"),        // unique local, RFC 4193
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local, RFC 3879
}

// Prefixes that embed an IPv4 address in an IPv6 one.
var (
	nat64WKP   = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052 well-known prefix
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215 local-use
	sixToFour  = netip.MustParsePrefix("2002::/16")      // RFC 3056
	teredo     = netip.MustParsePrefix("2001::/32")      // RFC 4380
	compat     = netip.MustParsePrefix("::/96")          // IPv4-compatible, RFC 4291 §2.5.5.1 (deprecated)
)

// Classify returns the built-in class of a and the reason that class gives
// for a denial (ReasonAllowed for public). IPv4 embedded in IPv6 (mapped,
// compatible, NAT64, 6to4, Teredo) is classified by its IPv4 part; a zone
// is ignored; the zero Addr is never.
func Classify(a netip.Addr) (Class, Reason) {
	if !a.IsValid() {
		return ClassNever, ReasonReserved
	}
	a = a.WithZone("") // netip.Prefix.Contains is false for zoned addresses
	if a.Is4In6() {
		a = a.Unmap()
	}
	if c, r, ok := classifyNever(a); ok {
		return c, r
	}
	if v4, ok := embeddedV4(a); ok {
		return classify4(v4)
	}
	if nat64Local.Contains(a) {
		// The local-use NAT64 prefix may be any length from /48 to /96,
		// and the IPv4 part sits where that length puts it (RFC 6052
		// §2.2): take the most restrictive reading.
		return classifyNAT64Local(a)
	}
	if a.Is4() {
		return classify4(a)
	}
	if containsAny(privatePrefixes, a) {
		return ClassPrivate, ReasonPrivate
	}
	return ClassPublic, ReasonAllowed
}

func classify4(a netip.Addr) (Class, Reason) {
	if c, r, ok := classifyNever(a); ok {
		return c, r
	}
	if containsAny(privatePrefixes, a) {
		return ClassPrivate, ReasonPrivate
	}
	return ClassPublic, ReasonAllowed
}

// classifyNever returns the never class for a (unzoned, unmapped), if any.
func classifyNever(a netip.Addr) (Class, Reason, bool) {
	for _, m := range metadataAddrs {
		if a == m {
			return ClassNever, ReasonMetadata, true
		}
	}
	switch {
	case containsAny(linkLocal, a):
		return ClassNever, ReasonLinkLocal, true
	case a.IsUnspecified(), a == broadcast, containsAny(multicast, a):
		return ClassNever, ReasonReserved, true
	}
	return 0, "", false
}

// embeddedV4 extracts the IPv4 address an IPv6 address carries, for the
// translation and tunnelling forms whose IPv4 part is the real peer.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64WKP.Contains(a), compat.Contains(a) && !a.IsLoopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(a):
		// The client's IPv4 address is stored inverted (RFC 4380 §4).
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// classifyNAT64Local classifies an address of 64:ff9b:1::/48 by every
// placement of the IPv4 part RFC 6052 §2.2 allows at prefix lengths /48,
// /56, /64 and /96 (bits 64–71 are the reserved "u" octet), keeping the
// most restrictive class: the operator's prefix length is not known here.
func classifyNAT64Local(a netip.Addr) (Class, Reason) {
	b := a.As16()
	cands := [...][4]byte{
		{b[6], b[7], b[9], b[10]},    // /48
		{b[7], b[9], b[10], b[11]},   // /56
		{b[9], b[10], b[11], b[12]},  // /64
		{b[12], b[13], b[14], b[15]}, // /96
	}
	worst, why, read := ClassPublic, ReasonAllowed, false
	for _, c := range cands {
		if c[0] == 0 {
			// 0.0.0.0/8 is no destination a NAT64 translates to: such a
			// reading is only the zero padding of another placement.
			continue
		}
		read = true
		cl, r := classify4(netip.AddrFrom4(c))
		if cl > worst || cl == worst && reasonRank(r) > reasonRank(why) {
			worst, why = cl, r
		}
	}
	if !read {
		return ClassPrivate, ReasonPrivate
	}
	return worst, why
}

// reasonRank orders the never reasons by how specific they are, so that an
// address that reads as metadata in one placement is reported as such.
func reasonRank(r Reason) int {
	switch r {
	case ReasonMetadata:
		return 3
	case ReasonLinkLocal:
		return 2
	case ReasonReserved:
		return 1
	}
	return 0
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
