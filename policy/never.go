package policy

import "net/netip"

// neverPrefixes are the destinations no emitted ipBlock may include: the
// guard's never class that an address range can express (docs/design.md
// "Addresses: the guard"), including metadata addresses embedded in IPv6
// (NAT64 64:ff9b::/96 of RFC 6052, 6to4 2002::/16 of RFC 3056), which a
// NAT64 or 6to4 gateway would carry to the IPv4 address. IPv4-mapped
// addresses (::ffff:0:0/96) are not listed: they never leave a host as IPv6
// (a dual-stack socket sends IPv4, which the 0.0.0.0/0 excepts cover), and
// API servers with strict IP validation refuse them in a CIDR.
var neverPrefixes = []netip.Prefix{
	// IPv4: link-local (RFC 3927) holds 169.254.169.254, 169.254.170.2 and
	// 169.254.170.23; Azure WireServer and Alibaba metadata are outside it.
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("168.63.129.16/32"),
	netip.MustParsePrefix("100.100.100.200/32"),
	// IPv6: link-local (RFC 4291) and the AWS and IBM metadata endpoints.
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("fd00:ec2::23/128"),
	netip.MustParsePrefix("fd20:ce::254/128"),
	// IPv4 never ranges embedded in IPv6.
	netip.MustParsePrefix("64:ff9b::a9fe:0/112"),
	netip.MustParsePrefix("64:ff9b::a83f:8110/128"),
	netip.MustParsePrefix("64:ff9b::6464:64c8/128"),
	netip.MustParsePrefix("2002:a9fe::/32"),
	netip.MustParsePrefix("2002:a83f:8110::/48"),
	netip.MustParsePrefix("2002:6464:64c8::/48"),
}

// NeverPrefixes returns the ranges excepted from every ipBlock that
// egressd netpol emits (package netpol). The slice is a copy.
func NeverPrefixes() []netip.Prefix { return append([]netip.Prefix(nil), neverPrefixes...) }
