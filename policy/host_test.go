package policy

import (
	"errors"
	"strings"
	"testing"
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
		{"numeric tld", "example.123"},
		{"short ipv4", "127.1"},
		{"decimal ipv4", "2130706433"},
		{"leading zero ipv4", "010.0.0.1"},
		{"ipv4 trailing dot", "192.0.2.1."},
		{"bracketed ipv4", "[192.0.2.1]"},
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
		"[::1]", "192.0.2.1", "xn--bcher-kva.example", "a..b", name253, "ＥＸＡＭＰＬＥ．com", "fe80::1%eth0"} {
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
		if _, ok := parseIPLiteral(out); ok {
			return
		}
		if len(out) > maxNameLen || !isNormalName(out) {
			t.Fatalf("NormalizeHost(%q) = %q: not a normal name", in, out)
		}
	})
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
