package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePatternAccept(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"exact", "models.example.com", "models.example.com"},
		{"upper and dot", "Models.Example.COM.", "models.example.com"},
		{"star", "*.example.com", "*.example.com"},
		{"star middle", "ec2.*.amazonaws.com", "ec2.*.amazonaws.com"},
		{"two stars", "*.*.example.com", "*.*.example.com"},
		{"globstar", "**.blob.example.net", "**.blob.example.net"},
		{"globstar then star", "**.*.example.com", "**.*.example.com"},
		{"IDN", "*.bücher.example", "*.xn--bcher-kva.example"},
		{"srv", "_https._tcp.example.com", "_https._tcp.example.com"},
		{"srv wildcard", "*._tcp.example.com", "*._tcp.example.com"},
		{"exact public suffix", "co.uk", "co.uk"},
		{"exact tld", "com", "com"},
		{"private suffix loads", "*.s3.amazonaws.com", "*.s3.amazonaws.com"},
		{"unlisted tld", "*.corp.internal", "*.corp.internal"},
		{"unlisted tld apex", "*.internal", "*.internal"},
		{"star right of registrable", "*.example.co.uk", "*.example.co.uk"},
		{"name 253", name253, name253},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if err != nil {
				t.Fatalf("ParsePattern(%q): %v", tt.in, err)
			}
			if p.String() != tt.want {
				t.Fatalf("ParsePattern(%q) = %q, want %q", tt.in, p, tt.want)
			}
		})
	}
}

func TestParsePatternReject(t *testing.T) {
	tests := []struct {
		name, in, why string
	}{
		{"empty", "", "empty"},
		{"bare star", "*", "bare"},
		{"bare globstar", "**", "bare"},
		{"bare star dot", "*.", "bare"},
		{"partial left", "a*.example.com", "whole label"},
		{"partial right", "*a.example.com", "whole label"},
		{"triple star", "***.example.com", "whole label"},
		{"globstar middle", "a.**.example.com", "leftmost"},
		{"globstar twice", "**.**.example.com", "leftmost"},
		{"star last", "example.*", "last label"},
		{"star com", "*.com", "ICANN public suffix \"com\""},
		{"globstar co.uk", "**.co.uk", "ICANN public suffix \"co.uk\""},
		{"star star com", "*.*.com", "ICANN"},
		{"www star com", "www.*.com", "ICANN"},
		{"wildcard psl rule", "*.ck", "ICANN"},
		{"inside wildcard psl rule", "*.kawasaki.jp", "ICANN"},
		{"star upper COM", "*.COM.", "ICANN"},
		{"ipv4", "192.0.2.1", "IP literal"},
		{"ipv6", "[2001:db8::1]", "IP literal"},
		{"empty label", "*..example.com", "empty label"},
		{"label 64", "*." + label64 + ".com", "more than 63"},
		{"name 254", name254, "more than 253"},
		{"space", "* .example.com", "whole label"},
		{"invalid punycode", "*.xn--zz.example", "invalid"},
		{"not utf8", "*.\xff.example", "UTF-8"},
		{"numeric tld", "*.example.42", "numeric"},
		{"hex tld", "*.example.0x2a", "numeric"},
		{"hex address", "0xa9fea9fe", "numeric"},
		{"short address", "169.254.43518", "numeric"},
		{"octal address", "0251.0376.0251.0376", "numeric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePattern(tt.in)
			if err == nil {
				t.Fatalf("ParsePattern(%q) = %q, want an error", tt.in, p)
			}
			if !errors.Is(err, ErrInvalidPattern) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("ParsePattern(%q): %v; want ErrInvalidPattern saying %q", tt.in, err, tt.why)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		host    string
		want    bool
	}{
		{"a.example.com", "a.example.com", true},
		{"a.example.com", "b.example.com", false},
		{"a.example.com", "x.a.example.com", false},
		{"a.example.com", "example.com", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false}, // never the apex
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "aexample.com", false},
		{"*.example.com", "a.example.org", false},
		{"ec2.*.amazonaws.com", "ec2.us-east-1.amazonaws.com", true},
		{"ec2.*.amazonaws.com", "ec2.amazonaws.com", false},
		{"ec2.*.amazonaws.com", "ec2.a.b.amazonaws.com", false},
		{"ec2.*.amazonaws.com", "s3.us-east-1.amazonaws.com", false},
		{"**.example.com", "a.example.com", true},
		{"**.example.com", "a.b.c.example.com", true},
		{"**.example.com", "example.com", false}, // never the apex
		{"**.example.com", "badexample.com", false},
		{"**.*.example.com", "a.example.com", false},
		{"**.*.example.com", "a.b.example.com", true},
		{"*.*.example.com", "a.b.example.com", true},
		{"*.*.example.com", "a.b.c.example.com", false},
		{"_https._tcp.example.com", "_https._tcp.example.com", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.host, func(t *testing.T) {
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match(tt.host); got != tt.want {
				t.Fatalf("%q.Match(%q) = %v, want %v", tt.pattern, tt.host, got, tt.want)
			}
			// The index must agree with Match.
			s := compileOne(t, tt.pattern)
			d := s.Decide(DecideArgs{Client: testClient("ns", nil), Host: tt.host, Port: 443})
			if d.Allowed() != tt.want {
				t.Fatalf("Decide(%q) with pattern %q: %+v, want allowed=%v", tt.host, tt.pattern, d, tt.want)
			}
		})
	}
}

func TestPatternCovers(t *testing.T) {
	tests := []struct {
		p, q string
		want bool
	}{
		{"a.example.com", "a.example.com", true},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "a.b.example.com", false},
		{"**.example.com", "a.b.example.com", true},
		{"**.example.com", "*.example.com", true},
		{"**.example.com", "**.a.example.com", true},
		{"**.example.com", "example.com", false},
		{"*.example.com", "**.example.com", false},
		{"a.example.com", "*.example.com", false},
		{"**.a.example.com", "**.example.com", false},
		{"ec2.*.amazonaws.com", "ec2.eu.amazonaws.com", true},
		{"*.*.example.com", "ec2.*.example.com", true},
		{"**.*.example.com", "**.example.com", false},
		{"**.*.example.com", "a.b.example.com", true},
	}
	for _, tt := range tests {
		t.Run(tt.p+" covers "+tt.q, func(t *testing.T) {
			p, q := mustPattern(t, tt.p), mustPattern(t, tt.q)
			if got := p.Covers(q); got != tt.want {
				t.Fatalf("%q.Covers(%q) = %v, want %v", tt.p, tt.q, got, tt.want)
			}
		})
	}
}

func mustPattern(t *testing.T, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"*.example.com", "**.blob.example.net", "ec2.*.amazonaws.com", "*.com",
		"a*.b.com", "**", "*.bücher.example", "_srv._tcp.example.com", "**.*.x.org", "example.*"} {
		f.Add(s, "a.example.com")
	}
	f.Fuzz(func(t *testing.T, raw, host string) {
		p, err := ParsePattern(raw)
		if err != nil {
			return
		}
		again, err := ParsePattern(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", raw, p, again, err)
		}
		if p.Exact() && !p.Match(p.String()) {
			t.Fatalf("exact %q does not match itself", p)
		}
		if !p.Covers(p) {
			t.Fatalf("%q does not cover itself", p)
		}
		// Wildcards never match the apex: the fixed part right of the
		// leftmost wildcard.
		if i := strings.LastIndex(p.String(), "*."); i >= 0 && p.Match(p.String()[i+2:]) {
			t.Fatalf("%q matches its apex", p)
		}
		if h, err := NormalizeHost(host); err == nil && isNormalName(h) {
			s := compileOne(t, p.String())
			d := s.Decide(DecideArgs{Client: testClient("ns", nil), Host: h, Port: 443})
			if d.Allowed() != p.Match(h) && !IsMetadataName(h) {
				t.Fatalf("index and Match disagree on %q for %q: %+v", h, p, d)
			}
		}
	})
}
