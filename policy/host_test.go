package policy

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// label63 and friends build names at the RFC 1035 limits.
var (
	label63 = strings.Repeat("a", 63)
	label64 = strings.Repeat("a", 64)
	// 4 labels of 63 + 3 dots = 255; trimmed to 253 and 254 below.
	name253 = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	name254 = label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 62)
)

func TestNormalizeHostAccept(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "example.com", "example.com"},
		{"upper case", "ExAmPle.COM", "example.com"},
		{"trailing dot", "example.com.", "example.com"},
		{"single label", "localhost", "localhost"},
		{"srv labels", "_xmpp-server._tcp.Example.com", "_xmpp-server._tcp.example.com"},
		{"underscore inside", "my_host.example.com", "my_host.example.com"},
		{"hyphens inside", "r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com"},
		{"IDN", "bücher.example", "xn--bcher-kva.example"},
		{"IDN upper", "BÜCHER.example", "xn--bcher-kva.example"},
		{"IDN nontransitional", "straße.de", "xn--strae-oqa.de"},
		{"full-width", "ＥＸＡＭＰＬＥ．com", "example.com"},
		{"ideographic dot", "a.b。com", "a.b.com"},
		{"valid A-label", "XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"digits first label", "1.example.com", "1.example.com"},
		{"label 63", label63 + ".com", label63 + ".com"},
		{"name 253", name253, name253},
		{"name 253 with dot", name253 + ".", name253},
		{"ipv4", "192.0.2.1", "192.0.2.1"},
		{"ipv6", "2001:DB8::1", "2001:db8::1"},
		{"bracketed ipv6", "[2001:db8::1]", "2001:db8::1"},
		{"mapped ipv6", "::FFFF:192.0.2.1", "::ffff:192.0.2.1"},
		{"ipv6 starting with a letter", "FD00:EC2::254", "fd00:ec2::254"},
		{"link-local ipv6 with zone", "fe80::1%eth0", "fe80::1%eth0"},
		{"bracketed link-local ipv6 with zone", "[fe80::1%eth0]", "fe80::1%eth0"},
		// IPv4 spellings of inet_aton and the WHATWG URL parser (issue 10).
		{"hex dword", "0xa9fea9fe", "169.254.169.254"},
		{"hex dword upper", "0XA9FEA9FE", "169.254.169.254"},
		{"hex octets", "0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"three parts", "169.254.43518", "169.254.169.254"},
		{"two parts", "169.16689662", "169.254.169.254"},
		{"octal octets", "0251.0376.0251.0376", "169.254.169.254"},
		{"decimal dword", "2852039166", "169.254.169.254"},
		{"mixed bases", "0xa9.0376.43518", "169.254.169.254"},
		{"short ipv4", "127.1", "127.0.0.1"},
		{"decimal loopback", "2130706433", "127.0.0.1"},
		{"octal loopback", "0177.1", "127.0.0.1"},
		{"leading zero is octal", "010.0.0.1", "8.0.0.1"},
		{"octal zero padding", "0000000000000000000000251.254.169.254", "169.254.169.254"},
		{"long hex zeros", "0x00000000000000000000a9fea9fe", "169.254.169.254"},
		{"bare 0x is zero", "0x", "0.0.0.0"},
		{"zero", "0", "0.0.0.0"},
		{"max", "4294967295", "255.255.255.255"},
		{"ipv4 trailing dot", "192.0.2.1.", "192.0.2.1"},
		{"numeric trailing dot", "0xa9fea9fe.", "169.254.169.254"},
		{"full-width digits", "１６９．２５４．１６９．２５４", "169.254.169.254"},
		{"ideographic dots", "127。1", "127.0.0.1"},
		// Names that only look numeric stay names.
		{"hex first label", "0x1.example.com", "0x1.example.com"},
		{"numeric first labels", "169.254.169.254.example.com", "169.254.169.254.example.com"},
		{"not hex", "0xg", "0xg"},
		{"hex-like tld with a letter beyond f", "1.0x1g", "1.0x1g"},
		{"digits then letters", "1.2.3.4a", "1.2.3.4a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeHost(tt.in)
			if err != nil {
				t.Fatalf("NormalizeHost(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("NormalizeHost(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeHostReject(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"dot", "."},
		{"two trailing dots", "example.com.."},
		{"empty label", "a..example.com"},
		{"leading dot", ".example.com"},
		{"label 64", label64 + ".com"},
		{"name 254", name254},
		{"space", "exa mple.com"},
		{"star", "*.example.com"},
		{"slash", "example.com/x"},
		{"colon port", "example.com:443"},
		{"at", "user@example.com"},
		{"leading hyphen", "-a.example.com"},
		{"trailing hyphen", "a-.example.com"},
		{"nul", "a\x00.example.com"},
		{"invalid punycode", "xn--zz.example"},
		{"joiner", "a\u200d.example"},
		{"bracketed ipv4", "[192.0.2.1]"},
		{"numeric tld", "example.123"},
		{"hex tld", "example.0x1f"},
		{"upper hex tld", "example.0XA"},
		{"five parts", "1.2.3.4.5"},
		{"empty part", "1..2"},
		{"empty part ipv4 form", "169..254.169.254"},
		{"octet over 255", "1.2.3.256"},
		{"inner octet over 255", "1.256.3.4"},
		{"three parts last over 16 bits", "169.254.65536"},
		{"two parts last over 24 bits", "169.16777216"},
		{"decimal over 32 bits", "4294967296"},
		{"hex over 32 bits", "0x100000000"},
		{"long decimal", "99999999999999999999999999999"},
		{"bad octal 8", "08"},
		{"bad octal in dotted", "169.254.169.0378"},
		{"two trailing dots ipv4", "1.2.3.4.."},
		{"leading dot ipv4", ".1.2.3.4"},
		{"space in ipv4", "1.2.3.4 "},
		{"sign", "+1.2.3.4"},
		{"mapped with decimal tail", "::ffff:169.254.43518"},
		{"invalid utf8", "\xff.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizeHost(tt.in)
			if err == nil {
				t.Fatalf("NormalizeHost(%q) = %q, want an error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalidHost) {
				t.Fatalf("NormalizeHost(%q): %v does not wrap ErrInvalidHost", tt.in, err)
			}
		})
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"example.com", "Example.COM.", "bücher.example", "_srv._tcp.x.org",
		"[::1]", "192.0.2.1", "xn--bcher-kva.example", "a..b", name253, "ＥＸＡＭＰＬＥ．com", "fe80::1%eth0",
		"0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "169.254.43518", "0251.0376.0251.0376", "2852039166", "0x1.example.com",
		"1.2.3.4.", "08", "0x", "１２７．１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalizeHost(in)
		if err != nil {
			return
		}
		again, err := NormalizeHost(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if a, ok := parseIPLiteral(out); ok {
			if a.String() != out {
				t.Fatalf("NormalizeHost(%q) = %q: not the canonical form %q", in, out, a)
			}
			return
		}
		// Never a numeric spelling left as a name: Decide would walk it
		// as one while a client dials the address it spells.
		if endsInNumber(out) || looksLikeIP(out) {
			t.Fatalf("NormalizeHost(%q) = %q: a numeric spelling left as a name", in, out)
		}
		if len(out) > maxNameLen || !isNormalName(out) {
			t.Fatalf("NormalizeHost(%q) = %q: not a normal name", in, out)
		}
	})
}

// TestNumericHostsDecide: every spelling of the metadata address is the
// metadata address to Decide once normalized, and invalid-host when a
// caller hands it over unnormalized (never a name that a rule could match).
func TestNumericHostsDecide(t *testing.T) {
	s := mustCompile(t, doc("ns", "p", metav1.LabelSelector{}, nil,
		rule([]int32{80, 443}, "**.example.com"),
		EgressRule{Ports: []int32{80}, CIDRs: []string{"0.0.0.0/0"}},
	))
	c := testClient("ns", nil)
	for _, raw := range []string{"0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "169.254.43518", "0251.0376.0251.0376", "2852039166", "169.16689662", "0xA9FEA9FE."} {
		t.Run(raw, func(t *testing.T) {
			host, err := NormalizeHost(raw)
			if err != nil {
				t.Fatal(err)
			}
			if d := s.Decide(DecideArgs{Client: c, Host: host, Port: 80, Mode: ModeAudit}); d.Allowed() || d.Reason != ReasonMetadata {
				t.Fatalf("Decide(%q) = %+v, want metadata", host, d)
			}
			if d := s.Decide(DecideArgs{Client: c, Host: raw, Port: 80}); d.Allowed() || d.Reason != ReasonInvalidHost {
				t.Fatalf("Decide(unnormalized %q) = %+v, want invalid-host", raw, d)
			}
		})
	}
	t.Run("a hex-looking first label is a name", func(t *testing.T) {
		host, err := NormalizeHost("0x1.Example.com")
		if err != nil {
			t.Fatal(err)
		}
		if d := s.Decide(DecideArgs{Client: c, Host: host, Port: 443}); !d.Allowed() || d.Reason != ReasonAllowed {
			t.Fatalf("Decide(%q) = %+v", host, d)
		}
	})
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
