package http1

import (
	"net/url"
	"testing"
)

// TestRedirectHost: Location values that a browser-grade client and an
// RFC 3986 reader resolve to different hosts are recorded with the host
// the browser follows, and flagged; the ordinary ones are not.
func TestRedirectHost(t *testing.T) {
	base, _ := url.Parse("https://api.llm.example/dl/weights.bin")
	tests := []struct {
		name, location, host string
		ambiguous            bool
	}{
		{"absolute", "https://blob.example.net/c/w.bin?sig=s", "blob.example.net", false},
		{"relative path", "/dl/other", "api.llm.example", false},
		{"network-path", "//cdn.example/x", "cdn.example", false},
		{"upper case and dot", "https://Blob.Example.NET./x", "blob.example.net", false},
		{"port and userinfo", "https://u:p@blob.example.net:8443/x", "blob.example.net", false},
		{"mailto", "mailto:a@example.com", "", false},
		{"empty", "", "", false},
		{"slash backslash", "/\\evil.example/weights.bin", "evil.example", true},
		{"two backslashes", "\\\\evil.example/x", "evil.example", true},
		{"tab inside the slashes", "/\t/evil.example/x", "evil.example", true},
		{"newline inside the slashes", "/\n/evil.example/x", "evil.example", true},
		{"scheme and backslashes", "https:\\\\evil.example\\x", "evil.example", true},
		{"backslash before the host's slash", "\\/evil.example/x", "evil.example", true},
		{"tab in the host", "https://ev\til.example/x", "evil.example", true},
		{"IPv6 literal", "http://[fd00:ec2::254]/x", "fd00:ec2::254", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, amb := RedirectHost(base, tt.location)
			if host != tt.host || amb != tt.ambiguous {
				t.Fatalf("RedirectHost(%q) = %q, %v; want %q, %v", tt.location, host, amb, tt.host, tt.ambiguous)
			}
		})
	}
}

// FuzzRedirectHost holds RedirectHost to both readings: when it says a
// Location is not ambiguous, net/url resolves it to the same host it
// records; it never panics on any Location.
func FuzzRedirectHost(f *testing.F) {
	for _, s := range []string{"/\\evil.example/x", "\\\\a/b", "/\t/a", "https://a.example/x", "//a/b", "/p?q#f", "https:\\\\a\\b", "http://[::1]:80/", "%2F%2Fa", "/%5Cevil.example"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://api.llm.example/dl/weights.bin")
	f.Fuzz(func(t *testing.T, loc string) {
		host, amb := RedirectHost(base, loc)
		if amb || loc == "" { // no Location: no redirect host
			return
		}
		rfc := ""
		if u, err := base.Parse(loc); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			rfc = normHost(u.Hostname())
		}
		if host != rfc {
			t.Fatalf("RedirectHost(%q) = %q, not ambiguous; net/url reads %q", loc, host, rfc)
		}
	})
}
