package http1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestAppendRefusal: the raw refusal is one net/http reads with the same
// fields SetRefusalHeader sets, its body whole, and Connection: close only
// when asked.
func TestAppendRefusal(t *testing.T) {
	want := http.Header{}
	SetRefusalHeader(want, "path-not-allowed")
	for _, close := range []bool{true, false} {
		raw := AppendRefusal(nil, http.StatusForbidden, "path-not-allowed", "egressd: no\n", close)
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.Status != "403 Forbidden (egressd: path-not-allowed)" || string(body) != "egressd: no\n" || resp.Close != close {
			t.Fatalf("close=%v: %q %q close=%v", close, resp.Status, body, resp.Close)
		}
		for k := range want {
			if resp.Header.Get(k) != want.Get(k) {
				t.Errorf("close=%v: %s = %q; SetRefusalHeader sets %q", close, k, resp.Header.Get(k), want.Get(k))
			}
		}
	}
}

// TestAppendReasonPhrase: the reason goes into the phrase in parentheses,
// bytes a reason phrase may not hold are dropped, no reason keeps the
// plain status text.
func TestAppendReasonPhrase(t *testing.T) {
	cases := []struct {
		name   string
		code   int
		reason string
		want   string
	}{
		{"denial", 403, "not-allowlisted", "Forbidden (egressd: not-allowlisted)"},
		{"upstream failure", 502, "dial-failed", "Bad Gateway (egressd: dial-failed)"},
		{"no reason", 200, "", "OK"},
		{"unknown code", 599, "x", "status 599 (egressd: x)"},
		{"control bytes and spaces dropped", 403, "a\r\nb c\x7f", "Forbidden (egressd: abc)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendReasonPhrase(nil, tc.code, tc.reason)); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}
