package inspect

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"
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

// BenchmarkInspectedCredential: BenchmarkInspectedKeepAlive without and
// with a credential set on every request (issue 28's A/B: the header set
// replaces nothing the client sent), the two interleaved in each run. The
// figure includes the client's and the origin's work.
func BenchmarkInspectedCredential(b *testing.B) {
	for _, proto := range []string{"h1", "h2"} {
		for _, mode := range []string{"without", "with"} {
			b.Run(proto+"/"+mode, func(b *testing.B) {
				o := harnessOpts{}
				if mode == "with" {
					o.credential = []string{"Bearer sk-0123456789abcdef0123456789abcdef"}
				}
				h := newHarness(b, o)
				c := h.goClient(proto == "h2")
				u := h.originURL("/v1/models")
				get(b, c, u)
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					get(b, c, u)
				}
				// CPU of the whole process (client, engine and origin) per
				// request: steadier than wall time on a shared machine.
				b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
