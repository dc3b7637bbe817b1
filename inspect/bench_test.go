package inspect

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// BenchmarkInspectedKeepAlive: one request after another inside one
// inspected tunnel (Go client → CONNECT harness → engine → TLS origin, all
// on loopback), HTTP/1.1 and HTTP/2. The figure includes the client's and
// the origin's work: compare runs, not absolutes.
func BenchmarkInspectedKeepAlive(b *testing.B) {
	for _, proto := range []string{"h1", "h2"} {
		b.Run(proto, func(b *testing.B) {
			h := newHarness(b, harnessOpts{})
			c := h.goClient(proto == "h2")
			u := h.originURL("/v1/models")
			get(b, c, u) // the tunnel and the leaf
			b.ReportAllocs()
			for b.Loop() {
				get(b, c, u)
			}
		})
	}
}

// BenchmarkInspectedNewTunnel: a new CONNECT tunnel per request: the
// client's handshake with a cached leaf, the upstream handshake with full
// verification, one HTTP/1.1 request.
func BenchmarkInspectedNewTunnel(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	proxyURL, _ := url.Parse("http://" + h.proxy.Addr().String())
	tr := &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		TLSClientConfig:   &tls.Config{RootCAs: h.inspCA.pool()},
		DisableKeepAlives: true,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	u := h.originURL("/v1/models")
	get(b, c, u)
	b.ReportAllocs()
	for b.Loop() {
		get(b, c, u)
	}
}

func get(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}
