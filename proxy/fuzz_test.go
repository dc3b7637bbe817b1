package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
)

// FuzzProxyRequest feeds bytes from a pod through the proxy listener's
// reader and handlers, over a real loopback connection that the client
// half-closes after its input (no dial: the hook refuses). Whatever the
// input: nothing panics, never 407, every refusal carries X-Egressd-Reason,
// every answer has its record, and a request that was begun is recorded
// even when it never completes.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://models.test/w.bin HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"CONNECT models.test:443 HTTP/1.1\r\nHost: models.test:443\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
		"CONNECT http://169.254.169.254:443/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET https://models.test/ HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"POST http://models.test:8080/e?sig=x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
		"POST http://models.test/e HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
		"GET http://user:pw@169.254.169.254/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nEgressd-Probe: p1\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: e\r\n\r\n",
		"GET http://models.test/ HTTP/1.1\r\nHost: mod",
	} {
		f.Add([]byte(s))
	}
	var sink testutil.SyncBuffer
	var logBuf testutil.SyncBuffer
	m := metrics.New()
	store := identity.NewStore()
	store.Replace([]*corev1.Pod{testutil.RunningPod("llm-prod", "llm-0", "llm-server", podIP, map[string]string{"app": "llm"})})
	snap := compile(f, `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: p, namespace: llm-prod}
spec:
  podSelector: {}
  egress:
  - hosts: ["models.test"]
    ports: [80, 443, 8080]
`)
	p, err := New(Config{
		Inputs:   admit.Inputs{Policy: func() *policy.Snapshot { return snap }, Identity: store},
		Resolver: staticLookup{}, Guard: policy.NewGuard(policy.GuardConfig{}),
		Audit:   audit.New(audit.Config{Writers: []io.Writer{&sink}, Metrics: m}),
		Metrics: m, Logger: slog.New(slog.NewTextHandler(&logBuf, nil)),
		HeaderTimeout: 2 * time.Second,
	})
	if err != nil {
		f.Fatal(err)
	}
	p.dial = func(context.Context, netip.AddrPort) (net.Conn, error) { return nil, errors.New("no network in fuzz") }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go p.ServeProxy(ln)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
	f.Fuzz(func(t *testing.T, b []byte) {
		before := strings.Count(sink.String(), "\n")
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.Write(b)
			c.(*net.TCPConn).CloseWrite()
		}()
		c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang guard only
		out, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("reading the answers: %v", err)
		}
		// The records are written before the connection closes.
		records := strings.Count(sink.String(), "\n") - before
		answers := 0
		br := bufio.NewReader(bytes.NewReader(out))
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode < 200 {
				continue
			}
			answers++
			if resp.StatusCode == http.StatusProxyAuthRequired {
				t.Fatal("407")
			}
			if resp.StatusCode >= 400 && resp.Header.Get("X-Egressd-Reason") == "" {
				t.Fatalf("status %d without X-Egressd-Reason", resp.StatusCode)
			}
		}
		if records < answers {
			t.Fatalf("%d answers, %d records", answers, records)
		}
		if records == 0 && len(bytes.TrimLeft(b, "\r\n")) > 0 {
			t.Fatalf("no record for %q (answer %q)", b, out)
		}
		if s := logBuf.String(); s != "" {
			t.Fatalf("proxy log: %s", s)
		}
	})
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && bytes.Contains([]byte(ne.Err.Error()), []byte("reset"))
}
