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
		if resp.StatusCode != http.StatusForbidden || string(body) != "egressd: no\n" || resp.Close != close {
			t.Fatalf("close=%v: %d %q close=%v", close, resp.StatusCode, body, resp.Close)
		}
		for k := range want {
			if resp.Header.Get(k) != want.Get(k) {
				t.Errorf("close=%v: %s = %q; SetRefusalHeader sets %q", close, k, resp.Header.Get(k), want.Get(k))
			}
		}
	}
}
