package inspect

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkIdleInspectedTunnelMemory reports the memory an idle inspected
// HTTP/1.1 tunnel holds after one request (heap and stacks, KiB per
// tunnel): n tunnels through the harness minus n direct TLS connections
// to the same origin, each after one request, so that the client's and the
// origin's side cancel out. It includes the harness's CONNECT reader
// (4 KiB, the proxy's part): an upper bound for the engine. Run it with
// -benchtime 1x: one iteration is 400 TLS connections.
func BenchmarkIdleInspectedTunnelMemory(b *testing.B) {
	const n = 200
	h := newHarness(b, harnessOpts{})
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	target := h.origin.Listener.Addr().String()
	open := func(viaProxy bool) []net.Conn {
		var conns []net.Conn
		for range n {
			var (
				c   net.Conn
				err error
				ca  = h.originCA
			)
			if viaProxy {
				c, err = net.Dial("tcp", h.proxy.Addr().String())
				if err == nil {
					fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %[1]s:%[2]s\r\n\r\n", testHost, port)
					var resp *http.Response
					if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("CONNECT %d", resp.StatusCode)
					}
				}
				ca = h.inspCA
			} else {
				c, err = net.Dial("tcp", target)
			}
			if err != nil {
				b.Fatal(err)
			}
			tc := tls.Client(c, &tls.Config{ServerName: testHost, RootCAs: ca.pool(), NextProtos: []string{"http/1.1"}})
			fmt.Fprintf(tc, "GET /v1/models HTTP/1.1\r\nHost: %s:%s\r\n\r\n", testHost, port)
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			conns = append(conns, tc)
		}
		return conns
	}
	inUse := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	for b.Loop() {
		// Inspected first: what its closed tunnels still hold when the
		// direct phase starts only lowers the baseline, so the figure
		// errs high.
		base := inUse()
		inspected := open(true)
		inspectedUse := inUse() - base
		for _, c := range inspected {
			c.Close()
		}
		base = inUse()
		direct := open(false)
		directUse := inUse() - base
		for _, c := range direct {
			c.Close()
		}
		b.ReportMetric(float64(int64(inspectedUse)-int64(directUse))/n/1024, "KiB/idle-tunnel")
	}
}
