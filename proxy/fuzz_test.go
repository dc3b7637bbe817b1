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
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/metrics"
	"github.com/egressd/egressd/policy"
)

// FuzzProxyRequest feeds request heads through the proxy handler (no
// network: the dial hook refuses). Whatever the input: no panic escapes,
// never 407, a refusal carries X-Egressd-Reason, and one record is written.
func FuzzProxyRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://models.test/w.bin HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"CONNECT models.test:443 HTTP/1.1\r\nHost: models.test:443\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n",
		"GET https://models.test/ HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"POST http://models.test:8080/e?sig=x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
		"GET http://user:pw@169.254.169.254/ HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	sink := &bytes.Buffer{}
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
		Policy: func() *policy.Snapshot { return snap }, Identity: store,
		Resolver: staticLookup{}, Guard: policy.NewGuard(policy.GuardConfig{}),
		Audit:   audit.New(audit.Config{Writers: []io.Writer{sink}, Metrics: m}),
		Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		f.Fatal(err)
	}
	p.dial = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no network in fuzz") }
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		req.RemoteAddr = podIP + ":40000"
		sink.Reset()
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != nil && v != http.ErrAbortHandler {
					t.Fatalf("panic: %v", v)
				}
			}()
			p.handleProxy(w, req)
		}()
		if w.Code == http.StatusProxyAuthRequired {
			t.Fatal("407")
		}
		if w.Code >= 400 && w.Header().Get("X-Egressd-Reason") == "" {
			t.Fatalf("status %d without X-Egressd-Reason", w.Code)
		}
		if n := bytes.Count(sink.Bytes(), []byte("\n")); n != 1 {
			t.Fatalf("%d records", n)
		}
	})
}
