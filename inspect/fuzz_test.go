package inspect

import (
	"strings"
	"testing"
)

// FuzzRedaction: what the engine takes from a request target and a
// Location for a record never carries a query string, userinfo or a
// fragment, whatever they hold.
func FuzzRedaction(f *testing.F) {
	for _, s := range [][2]string{
		{"/v1/x?key=secret", "https://user:pw@blob.example.net:8443/c?sig=secret#frag"},
		{"https://api.llm.example/p?token=secret", "/relative?sig=secret"},
		{"https://api.llm.example?x=secret", "//evil.example/?a=b"},
		{"*", "mailto:a@b"},
		{"/%3Fnot-a-query?real=query", "https://[::1]:443/x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, target, location string) {
		p := recordPath(originTarget(target))
		if strings.Contains(p, "?") {
			t.Fatalf("recorded path %q of %q holds a query", p, target)
		}
		if q := strings.IndexByte(target, '?'); q >= 0 && len(target) > q+1 && strings.Contains(p, target[q:]) {
			t.Fatalf("recorded path %q holds the query of %q", p, target)
		}
		rh, _ := redirectHost(location, testHost)
		if strings.ContainsAny(rh, "?#@/") || strings.Contains(rh, "sig=") {
			t.Fatalf("redirect host %q of %q holds more than a host", rh, location)
		}
	})
}
