package inspect

import (
	"net/http"
	"strings"
	"testing"
)

// TestSetHeader: an allowed request gets the verdict's header once,
// replacing the client's values (ExchangeRecord.Replaced), over HTTP/1.1 and
// HTTP/2; a denied one is never forwarded; no record holds the value.
func TestSetHeader(t *testing.T) {
	const secret = "Bearer sk-engine-secret"
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			h := newHarness(t, harnessOpts{credential: []string{secret}})
			c := h.goClient(proto == "h2")
			for _, client := range []string{"", "Bearer client-held"} {
				req, _ := http.NewRequest("GET", h.originURL("/v1/models/auth"), nil)
				if client != "" {
					req.Header.Add("Authorization", client)
					req.Header.Add("Authorization", "Basic second")
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Header.Get("X-Auth"); got != secret {
					t.Fatalf("client %q: the origin got Authorization %q; want the credential once", client, got)
				}
			}
			resp, err := c.Post(h.originURL("/v1/models/auth"), "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Auth") != "" {
				t.Fatalf("denied request: %s, X-Auth %q", resp.Status, resp.Header.Get("X-Auth"))
			}
			h.wait()
			gets := h.exchangesFor("GET")
			if len(gets) != 2 || gets[0].Replaced || !gets[1].Replaced {
				t.Fatalf("exchanges %+v; want the second replaced", gets)
			}
			for _, r := range h.records() {
				if strings.Contains(r, "sk-engine-secret") {
					t.Fatalf("a record holds the credential: %s", r)
				}
			}
		})
	}
}

// TestRefusalStatus: a verdict's Status answers the refusal (503 for a
// credential that is unavailable); zero is 403.
func TestRefusalStatus(t *testing.T) {
	if got := refusalStatus(Verdict[struct{}]{Reason: "credential-unavailable", Status: http.StatusServiceUnavailable}); got != 503 {
		t.Fatalf("refusalStatus = %d", got)
	}
	if got := refusalStatus(Verdict[struct{}]{Reason: "path-not-allowed"}); got != 403 {
		t.Fatalf("refusalStatus = %d", got)
	}
}
