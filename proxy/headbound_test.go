package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/record"
)

// TestPlainResponseHeadBounded: on the plain HTTP path an origin's 24 MiB
// response head is answered 502 upstream-error with the one class of
// response heads over the limit (the inspected tunnels' too), counted in
// egressd_response_heads_too_large_total{kind="http"}; a head under the
// limit passes.
func TestPlainResponseHeadBounded(t *testing.T) {
	ln := listen(t, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				size := 24 << 20
				if req.URL.Path == "/small" {
					size = 60 << 10
				}
				bw := bufio.NewWriterSize(c, 64<<10)
				io.WriteString(bw, "HTTP/1.1 200 OK\r\nX-Big: ")
				chunk := strings.Repeat("a", 64<<10)
				for n := size; n > 0; n -= len(chunk) {
					if _, err := io.WriteString(bw, chunk[:min(n, len(chunk))]); err != nil {
						return
					}
				}
				io.WriteString(bw, "\r\nContent-Length: 2\r\n\r\nok")
				bw.Flush()
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	e := newEnv(t, envOpt{extra: "  - hosts: [\"models.test\"]\n    ports: [" + port + "]\n    cidrs: [\"127.0.0.0/8\"]\n"})
	for _, tt := range []struct {
		path   string
		status int
	}{{"/big", 502}, {"/small", 200}} {
		t.Run(tt.path, func(t *testing.T) {
			out, _, _ := curl(t, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--proxy", "http://"+e.addr, "--interface", podIP,
				fmt.Sprintf("http://models.test:%s%s", port, tt.path))
			if out != fmt.Sprint(tt.status) {
				t.Fatalf("status %s; want %d", out, tt.status)
			}
			r := e.sink.next(t)
			if tt.status == 200 {
				if r.Outcome != record.OutcomeOK {
					t.Fatalf("record outcome %q error %q; want ok", r.Outcome, r.Error)
				}
				return
			}
			if r.Outcome != record.OutcomeUpstreamError || r.Verdict != "allow" || !strings.Contains(r.Error, http1.ErrResponseHeadTooLarge.Error()+": over 131072 bytes") {
				t.Fatalf("record verdict %q outcome %q error %q; want allow, upstream-error and the class", r.Verdict, r.Outcome, r.Error)
			}
		})
	}
	var m dto.Metric
	if err := e.m.ResponseHeadsTooLarge.WithLabelValues(record.KindHTTP).Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("egressd_response_heads_too_large_total{kind=http} %v; want 1", n)
	}
}
