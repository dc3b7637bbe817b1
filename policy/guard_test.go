package policy

import (
	"net/netip"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr   string
		class  Class
		reason Reason
	}{
		// never: metadata, every spelling
		{"169.254.169.254", ClassNever, ReasonMetadata},
		{"169.254.170.2", ClassNever, ReasonMetadata},
		{"169.254.170.23", ClassNever, ReasonMetadata},
		{"fd00:ec2::254", ClassNever, ReasonMetadata},
		{"fd00:ec2::23", ClassNever, ReasonMetadata},
		{"fd20:ce::254", ClassNever, ReasonMetadata},
		{"100.100.100.200", ClassNever, ReasonMetadata},
		{"168.63.129.16", ClassNever, ReasonMetadata},
		{"::ffff:169.254.169.254", ClassNever, ReasonMetadata},               // mapped
		{"::169.254.169.254", ClassNever, ReasonMetadata},                    // compatible
		{"64:ff9b::a9fe:a9fe", ClassNever, ReasonMetadata},                   // NAT64
		{"64:ff9b::169.254.169.254", ClassNever, ReasonMetadata},             // NAT64, dotted
		{"64:ff9b::a83f:8110", ClassNever, ReasonMetadata},                   // NAT64 Azure
		{"64:ff9b:1:a9fe:a9:fe00::", ClassNever, ReasonMetadata},             // NAT64 local-use /48 placement
		{"64:ff9b:1::a9fe:a9fe", ClassNever, ReasonMetadata},                 // NAT64 local-use /96 placement
		{"2002:a9fe:a9fe::1", ClassNever, ReasonMetadata},                    // 6to4
		{"2001:0:4136:e378:8000:63bf:5601:5601", ClassNever, ReasonMetadata}, // Teredo, client ^0xa9fea9fe
		{"fd00:ec2::254%eth0", ClassNever, ReasonMetadata},                   // zone
		// never: link-local
		{"169.254.0.1", ClassNever, ReasonLinkLocal},
		{"169.254.255.255", ClassNever, ReasonLinkLocal},
		{"fe80::1", ClassNever, ReasonLinkLocal},
		{"fe80::1%eth0", ClassNever, ReasonLinkLocal},
		{"febf:ffff::1", ClassNever, ReasonLinkLocal},
		{"::ffff:169.254.1.1", ClassNever, ReasonLinkLocal},
		{"64:ff9b::a9fe:101", ClassNever, ReasonLinkLocal},
		{"2002:a9fe:101::", ClassNever, ReasonLinkLocal},
		// never: reserved
		{"0.0.0.0", ClassNever, ReasonReserved},
		{"::", ClassNever, ReasonReserved},
		{"::ffff:0.0.0.0", ClassNever, ReasonReserved},
		{"255.255.255.255", ClassNever, ReasonReserved},
		{"224.0.0.1", ClassNever, ReasonReserved},
		{"239.255.255.250", ClassNever, ReasonReserved},
		{"ff02::1", ClassNever, ReasonReserved},
		{"ff05::1:3", ClassNever, ReasonReserved},
		{"64:ff9b::e000:1", ClassNever, ReasonReserved},
		// private
		{"127.0.0.1", ClassPrivate, ReasonPrivate},
		{"127.255.0.1", ClassPrivate, ReasonPrivate},
		{"::1", ClassPrivate, ReasonPrivate},
		{"10.0.0.1", ClassPrivate, ReasonPrivate},
		{"172.16.0.1", ClassPrivate, ReasonPrivate},
		{"172.31.255.255", ClassPrivate, ReasonPrivate},
		{"192.168.1.1", ClassPrivate, ReasonPrivate},
		{"100.64.0.1", ClassPrivate, ReasonPrivate},
		{"100.127.255.254", ClassPrivate, ReasonPrivate},
		{"0.1.2.3", ClassPrivate, ReasonPrivate},
		{"192.0.0.8", ClassPrivate, ReasonPrivate},
		{"192.0.2.1", ClassPrivate, ReasonPrivate},
		{"198.18.0.1", ClassPrivate, ReasonPrivate},
		{"198.19.255.1", ClassPrivate, ReasonPrivate},
		{"198.51.100.1", ClassPrivate, ReasonPrivate},
		{"203.0.113.1", ClassPrivate, ReasonPrivate},
		{"240.0.0.1", ClassPrivate, ReasonPrivate},
		{"255.255.255.254", ClassPrivate, ReasonPrivate},
		{"fc00::1", ClassPrivate, ReasonPrivate},
		{"fd12:3456::1", ClassPrivate, ReasonPrivate},
		{"fec0::1", ClassPrivate, ReasonPrivate},
		{"2001:db8::1", ClassPrivate, ReasonPrivate},
		{"3fff::1", ClassPrivate, ReasonPrivate},
		{"100::1", ClassPrivate, ReasonPrivate},
		{"2001:2::1", ClassPrivate, ReasonPrivate},
		{"5f00::1", ClassPrivate, ReasonPrivate},
		{"::ffff:10.1.2.3", ClassPrivate, ReasonPrivate},
		{"::ffff:127.0.0.1", ClassPrivate, ReasonPrivate},
		{"::10.1.2.3", ClassPrivate, ReasonPrivate},
		{"64:ff9b::a01:203", ClassPrivate, ReasonPrivate},
		{"64:ff9b::127.0.0.1", ClassPrivate, ReasonPrivate},
		{"2002:c0a8:101::1", ClassPrivate, ReasonPrivate},
		{"2001:0:4136:e378:8000:63bf:f5fe:fffe", ClassPrivate, ReasonPrivate}, // Teredo client 10.1.0.1
		{"fe80::1%25eth0", ClassNever, ReasonLinkLocal},
		// public
		{"8.8.8.8", ClassPublic, ReasonAllowed},
		{"1.1.1.1", ClassPublic, ReasonAllowed},
		{"100.63.255.255", ClassPublic, ReasonAllowed},
		{"100.128.0.1", ClassPublic, ReasonAllowed},
		{"172.32.0.1", ClassPublic, ReasonAllowed},
		{"169.253.255.255", ClassPublic, ReasonAllowed},
		{"168.63.129.17", ClassPublic, ReasonAllowed},
		{"2606:4700::1111", ClassPublic, ReasonAllowed},
		{"::ffff:8.8.8.8", ClassPublic, ReasonAllowed},
		{"64:ff9b::808:808", ClassPublic, ReasonAllowed},
		{"64:ff9b:1::808:808", ClassPublic, ReasonAllowed},    // local-use /96
		{"64:ff9b:1:808:8:800::", ClassPublic, ReasonAllowed}, // local-use /48
		{"64:ff9b:1::a00:1", ClassPrivate, ReasonPrivate},
		{"64:ff9b:1::", ClassPrivate, ReasonPrivate},
		{"2002:808:808::1", ClassPublic, ReasonAllowed},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ClassPublic, ReasonAllowed}, // Teredo client 8.8.8.8
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a, err := netip.ParseAddr(tt.addr)
			if err != nil {
				// Only the "%25" spelling is expected here: a URL-escaped
				// zone is not an address; it never reaches the guard.
				if tt.addr == "fe80::1%25eth0" {
					a = netip.MustParseAddr("fe80::1%25eth0")
				} else {
					t.Fatal(err)
				}
			}
			c, r := Classify(a)
			if c != tt.class || r != tt.reason {
				t.Fatalf("Classify(%s) = %s, %s; want %s, %s", tt.addr, c, r, tt.class, tt.reason)
			}
		})
	}
	t.Run("zero addr", func(t *testing.T) {
		if c, r := Classify(netip.Addr{}); c != ClassNever || r != ReasonReserved {
			t.Fatalf("zero Addr: %s %s", c, r)
		}
	})
}

func TestPermit(t *testing.T) {
	allowed := Decision{Verdict: Allow, Reason: ReasonAllowed, Rule: 0}
	withCIDR := allowed
	withCIDR.CIDRs = []netip.Prefix{netip.MustParsePrefix("10.40.0.0/16"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")}
	g := NewGuard(GuardConfig{
		ExtraPrivate: []netip.Prefix{netip.MustParsePrefix("34.118.224.0/20")}, // a service CIDR in public space
		Self:         []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:3128"), netip.MustParseAddrPort("10.40.0.9:5353"), netip.MustParseAddrPort("[::]:8443")},
		SelfAddrs:    []netip.Addr{netip.MustParseAddr("10.40.0.9")},
	})
	tests := []struct {
		name   string
		g      *Guard
		d      Decision
		ap     string
		ok     bool
		reason Reason
	}{
		{"public", g, allowed, "8.8.8.8:443", true, ReasonAllowed},
		{"public v6", g, allowed, "[2606:4700::1111]:443", true, ReasonAllowed},
		{"denied decision stays denied", g, Denied(ReasonNotAllowlisted), "8.8.8.8:443", false, ReasonNotAllowlisted},
		{"private without cidrs", g, allowed, "10.40.0.1:443", false, ReasonPrivate},
		{"private in cidrs", g, withCIDR, "10.40.0.1:443", true, ReasonAllowed},
		{"private mapped in cidrs", g, withCIDR, "[::ffff:10.40.0.1]:443", true, ReasonAllowed},
		{"private nat64 in cidrs", g, withCIDR, "[64:ff9b::a28:1]:443", true, ReasonAllowed},
		{"private outside cidrs", g, withCIDR, "10.41.0.1:443", false, ReasonPrivate},
		{"extra private", g, allowed, "34.118.230.1:443", false, ReasonPrivate},
		{"loopback without cidrs", g, allowed, "127.0.0.1:8080", false, ReasonPrivate},
		{"loopback in cidrs", g, withCIDR, "127.0.0.1:8080", true, ReasonAllowed},
		{"metadata even in cidrs", g, withCIDR, "169.254.169.254:80", false, ReasonMetadata},
		{"link-local even in cidrs", g, withCIDR, "169.254.1.1:80", false, ReasonLinkLocal},
		{"nat64 metadata", g, allowed, "[64:ff9b::a9fe:a9fe]:80", false, ReasonMetadata},
		{"azure wireserver public", g, allowed, "168.63.129.16:80", false, ReasonMetadata},
		{"multicast", g, allowed, "224.0.0.251:5353", false, ReasonReserved},
		{"unspecified", g, allowed, "0.0.0.0:443", false, ReasonReserved},
		{"self exact", g, withCIDR, "10.40.0.9:5353", false, ReasonSelf},
		{"self via unspecified and SelfAddrs", g, withCIDR, "10.40.0.9:3128", false, ReasonSelf},
		{"self via unspecified and loopback", g, withCIDR, "127.0.0.1:3128", false, ReasonSelf},
		{"self v6 listener on loopback", g, withCIDR, "[::1]:8443", false, ReasonSelf},
		{"self mapped", g, withCIDR, "[::ffff:10.40.0.9]:3128", false, ReasonSelf},
		{"not self other port", g, withCIDR, "10.40.0.9:443", true, ReasonAllowed},
		{"nil guard public", nil, allowed, "8.8.8.8:443", true, ReasonAllowed},
		{"nil guard private", nil, allowed, "192.168.0.1:443", false, ReasonPrivate},
		{"zero guard metadata", &Guard{}, allowed, "[fd00:ec2::254]:80", false, ReasonMetadata},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, r := tt.g.Permit(tt.d, netip.MustParseAddrPort(tt.ap))
			if ok != tt.ok || r != tt.reason {
				t.Fatalf("Permit(%s) = %v, %s; want %v, %s", tt.ap, ok, r, tt.ok, tt.reason)
			}
		})
	}
}

func TestPermitAuditDecision(t *testing.T) {
	// An audit-mode softened denial carries no cidrs: a private address
	// stays refused, a public one is dialled (and logged would_deny).
	var s *Snapshot
	d := s.Decide(DecideArgs{Client: &Client{Namespace: "ns"}, Host: "a.example.com", Port: 443, Mode: ModeAudit})
	if !d.WouldDeny || d.Mode != ModeAudit {
		t.Fatalf("audit decision: %+v", d)
	}
	g := NewGuard(GuardConfig{})
	if ok, r := g.Permit(d, netip.MustParseAddrPort("8.8.8.8:443")); !ok || r != ReasonAllowed {
		t.Fatalf("public: %v %s", ok, r)
	}
	if ok, r := g.Permit(d, netip.MustParseAddrPort("10.0.0.1:443")); ok || r != ReasonPrivate {
		t.Fatalf("private: %v %s", ok, r)
	}
	// The guard keeps a would_deny decision's reason (what enforce mode
	// says of the request) for a private address, but denies the never
	// class.
	check := func(d Decision, ap string) Decision {
		a := netip.MustParseAddrPort(ap)
		c, _ := g.CheckAll(d, []netip.Addr{a.Addr()}, a.Port())
		return c
	}
	if c := check(d, "10.0.0.1:443"); !c.Allowed() || !c.WouldDeny || c.Reason != ReasonNotAllowlisted {
		t.Fatalf("Check private in audit: %+v", c)
	}
	// An allowed decision in audit mode: the private refusal is softened
	// and recorded as private-address.
	allowed := mustCompile(t, withMode(doc("ns", "p", metav1.LabelSelector{}, nil, rule([]int32{443}, "a.example.com")), ModeAudit)).
		Decide(DecideArgs{Client: &Client{Namespace: "ns"}, Host: "a.example.com", Port: 443})
	if c := check(allowed, "10.0.0.1:443"); !c.Allowed() || !c.WouldDeny || c.Reason != ReasonPrivate || c.Policy != "ns/p" {
		t.Fatalf("Check private of an allowed audit decision: %+v", c)
	}
	if c := check(d, "169.254.169.254:80"); c.Allowed() || c.Reason != ReasonMetadata {
		t.Fatalf("Check metadata in audit: %+v", c)
	}
}

// TestAppendCheckAll: CheckAll into the caller's buffer gives CheckAll's
// answer, and for one address into a buffer of one it allocates nothing
// (revocation's pass over every open connection).
func TestAppendCheckAll(t *testing.T) {
	g := NewGuard(GuardConfig{})
	allowed := mustCompile(t, doc("ns", "p", metav1.LabelSelector{}, nil, withCIDRs(rule([]int32{443}, "a.example.com"), "10.1.0.0/16"))).
		Decide(DecideArgs{Client: &Client{Namespace: "ns"}, Host: "a.example.com", Port: 443})
	for _, tc := range []struct {
		name  string
		addrs []string
	}{
		{"public", []string{"93.184.216.34"}},
		{"private inside cidrs", []string{"10.1.0.1"}},
		{"private outside cidrs", []string{"10.2.0.1"}},
		{"metadata", []string{"169.254.169.254"}},
		{"mapped", []string{"::ffff:10.1.0.1"}},
		{"several", []string{"10.2.0.1", "169.254.1.1", "10.1.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, a := range tc.addrs {
				addrs = append(addrs, netip.MustParseAddr(a))
			}
			want, wantAddrs := g.CheckAll(allowed, addrs, 443)
			var buf [4]netip.AddrPort
			got, gotAddrs := g.AppendCheckAll(buf[:0], allowed, addrs, 443)
			if !reflect.DeepEqual(got, want) || len(gotAddrs) != len(wantAddrs) || len(wantAddrs) > 0 && !reflect.DeepEqual(gotAddrs, wantAddrs) {
				t.Fatalf("AppendCheckAll = %+v %v, CheckAll %+v %v", got, gotAddrs, want, wantAddrs)
			}
		})
	}
	one := [1]netip.Addr{netip.MustParseAddr("10.1.0.1")}
	if n := testing.AllocsPerRun(100, func() {
		var buf [1]netip.AddrPort
		if d, _ := g.AppendCheckAll(buf[:0], allowed, one[:], 443); !d.Allowed() {
			t.Fatalf("refused: %+v", d)
		}
	}); n != 0 {
		t.Fatalf("AppendCheckAll of one address into a buffer: %v allocations, want 0", n)
	}
}

func TestIsMetadataName(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"metadata.google.internal", true},
		{"metadata.google.internal.", true},
		{"METADATA.Google.Internal", true},
		{"metadata.goog", true},
		{"metadata", true},
		{"metadata.", true},
		{"instance-data", true},
		{"instance-data.ec2.internal", true},
		{"metadata.example.com", false},
		{"google.internal", false},
		{"xmetadata", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := IsMetadataName(tt.host); got != tt.want {
				t.Fatalf("IsMetadataName(%q) = %v", tt.host, got)
			}
		})
	}
}

// TestNeverPrefixesMatchGuard holds the NetworkPolicy excepts (never.go, package netpol)
// and the guard to one list: every metadata address is excepted, and every
// excepted range is never-class at both ends.
func TestNeverPrefixesMatchGuard(t *testing.T) {
	never := NeverPrefixes()
	for _, a := range metadataAddrs {
		if !containsAny(never, a) {
			t.Errorf("metadata address %s is not in NeverPrefixes", a)
		}
	}
	for _, p := range never {
		first := p.Masked().Addr()
		last := lastAddr(p)
		for _, a := range []netip.Addr{first, last} {
			if c, _ := Classify(a); c != ClassNever {
				t.Errorf("NeverPrefixes holds %s, which the guard classifies %s (%s)", p, c, a)
			}
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func FuzzClassify(f *testing.F) {
	for _, s := range [][]byte{{169, 254, 169, 254}, {10, 0, 0, 1}, make([]byte, 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		c, r := Classify(a)
		// The mapped spelling never changes the class.
		if a.Is4() {
			if c6, r6 := Classify(netip.AddrFrom16(a.As16())); c6 != c || r6 != r {
				t.Fatalf("%s: %s/%s, mapped %s/%s", a, c, r, c6, r6)
			}
		}
		if (c == ClassNever) != r.Never() {
			t.Fatalf("%s: class %s with reason %s", a, c, r)
		}
	})
}
