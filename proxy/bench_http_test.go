package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/egressd/egressd/record"
)

// BenchmarkPlainHTTP compares egressd's own HTTP/1 server (head.go,
// response.go, server.go) with net/http's on the whole plain-HTTP path: a
// keep-alive client GETs http://models.test/small through a real proxy
// listener to a local origin, each request decided, resolved, guarded and
// dialled anew (forward.go). own is the proxy listener; stdlib is an
// http.Server on another listener whose handler runs the same exchange
// (handleProxy, then its record), so the difference is the server and
// its ResponseWriter alone.
//
//	go test -run '^$' -bench PlainHTTP -benchmem -count 6 ./proxy/
//
// Figures are in docs/architecture.md ("Measured choices on the request
// path").
func BenchmarkPlainHTTP(b *testing.B) {
	e := newEnv(b, envOpt{discardAudit: true, maxConns: -1})
	std := listen(b, "127.0.0.1:0")
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, _ := netip.ParseAddrPort(r.RemoteAddr)
		ex := e.p.newExchange(record.KindHTTP, ap.Addr().Unmap())
		ex.rec.HTTP = &record.HTTP{Method: r.Method}
		e.p.handleProxy(w, r, ex)
		ex.finish(ex.forwardedAfter(false, r.Context().Err() != nil), nil)
	})}
	go srv.Serve(std)
	b.Cleanup(func() { srv.Close() })
	target := fmt.Sprintf("http://models.test:%d/small", e.httpPort)
	for _, v := range []struct{ name, addr string }{{"own", e.addr}, {"stdlib", std.Addr().String()}} {
		b.Run(v.name, func(b *testing.B) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
			dials := 0
			tr := &http.Transport{
				Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: v.addr}),
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials++ // one request at a time
					return d.DialContext(ctx, network, addr)
				},
			}
			b.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				resp, err := c.Get(target)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s %v", resp.Status, err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			if dials > 1 {
				b.Fatalf("%d client connections for %d requests: not kept alive", dials, b.N)
			}
		})
	}
}
