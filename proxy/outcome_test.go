package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/record"
)

// startBadOrigin serves on 127.0.0.1 what a failing origin does with each
// connection: "close" closes it before answering a request, "silent"
// reads the request and never answers.
func startBadOrigin(t *testing.T, how string) int {
	t.Helper()
	ln := listen(t, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				if how == "silent" {
					io.Copy(io.Discard, br) // until the proxy gives up
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// rule opens models.test on port inside 127.0.0.0/8.
func rule(port int) string {
	return fmt.Sprintf("  - hosts: [\"models.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", port)
}

// timeoutDial is a dial hook whose connect times out, without any
// unroutable address.
func timeoutDial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// TestUpstreamFailureOutcomes: a request that policy allowed and that then
// failed upstream is answered 502 or 504 and keeps verdict allow and
// reason allowed; what failed is the record's outcome, and the
// X-Egressd-Reason header names it. CONNECT, absolute-form HTTP and the
// Host listener alike.
func TestUpstreamFailureOutcomes(t *testing.T) {
	closed := testutil.ClosedPort(t)
	closing := startBadOrigin(t, "close")
	silent := startBadOrigin(t, "silent")
	e := newEnv(t, envOpt{extra: rule(closed) + rule(closing) + rule(silent), responseHeaderTimeout: 300 * time.Millisecond})
	host := func(port int) string { return fmt.Sprintf("models.test:%d", port) }
	for _, tc := range []struct {
		name    string
		kind    string // connect, http or host (the Host listener)
		port    int
		timeout bool // dial through timeoutDial
		status  int
		outcome string
	}{
		{"CONNECT to a closed port", "connect", closed, false, 502, record.OutcomeDialFailed},
		{"CONNECT whose connect times out", "connect", e.tlsPort, true, 504, record.OutcomeDialTimeout},
		{"absolute-form to a closed port", "http", closed, false, 502, record.OutcomeDialFailed},
		{"absolute-form whose connect times out", "http", e.httpPort, true, 504, record.OutcomeDialTimeout},
		{"absolute-form, origin closes before answering", "http", closing, false, 502, record.OutcomeUpstreamError},
		{"absolute-form, origin never answers", "http", silent, false, 504, record.OutcomeUpstreamError},
		{"Host listener to a closed port", "host", closed, false, 502, record.OutcomeDialFailed},
		{"Host listener whose connect times out", "host", e.httpPort, true, 504, record.OutcomeDialTimeout},
		{"Host listener, origin closes before answering", "host", closing, false, 502, record.OutcomeUpstreamError},
		{"Host listener, origin never answers", "host", silent, false, 504, record.OutcomeUpstreamError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := e.p.dial
			if tc.timeout {
				e.p.dial = timeoutDial
				defer func() { e.p.dial = inner }()
			}
			var resp *http.Response
			switch tc.kind {
			case "connect":
				var c net.Conn
				c, resp = e.connect(podIP, host(tc.port))
				c.Close()
			case "http":
				resp = rawRequest(t, e.addr, "GET http://"+host(tc.port)+"/small HTTP/1.1\r\nHost: "+host(tc.port)+"\r\n\r\n")
			case "host":
				ln := listen(t, "127.0.0.1:0")
				go e.p.ServeTransparentHTTP(ln, tc.port)
				resp = rawRequest(t, ln.Addr().String(), "GET /small HTTP/1.1\r\nHost: models.test\r\n\r\n")
			}
			r := e.sink.next(t)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Egressd-Reason") != tc.outcome {
				t.Fatalf("status %d reason %q, want %d %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), tc.status, tc.outcome)
			}
			if r.Verdict != "allow" || r.Reason != "allowed" || r.WouldDeny || r.Outcome != tc.outcome || r.Policy == "" || r.Error == "" {
				t.Fatalf("record verdict %q reason %q outcome %q policy %q error %q", r.Verdict, r.Reason, r.Outcome, r.Policy, r.Error)
			}
			if r.Port != tc.port || r.Host != "models.test" || r.HTTP == nil || r.HTTP.Status != tc.status {
				t.Fatalf("record %+v http %+v", r, r.HTTP)
			}
		})
	}
	t.Run("resolve failure", func(t *testing.T) {
		f := newEnv(t, envOpt{extra: "  - hosts: [\"nx.test\"]\n    ports: [443]\n"})
		c, resp := f.connect(podIP, "nx.test:443")
		c.Close()
		r := f.sink.next(t)
		if resp.StatusCode != 502 || resp.Header.Get("X-Egressd-Reason") != record.OutcomeResolveFailed ||
			r.Verdict != "allow" || r.Reason != "allowed" || r.Outcome != record.OutcomeResolveFailed || f.dials.Load() != 0 {
			t.Fatalf("status %d record %+v", resp.StatusCode, r)
		}
	})
}

// TestOutcomeOfServedAndRefused: ok for what was served, refused for a
// denial (an audit-mode allow with would_deny was served: ok).
func TestOutcomeOfServedAndRefused(t *testing.T) {
	e := newEnv(t, envOpt{})
	resp := rawRequest(t, e.addr, fmt.Sprintf("GET http://models.test:%d/small HTTP/1.1\r\nHost: x\r\n\r\n", e.httpPort))
	if r := e.sink.next(t); resp.StatusCode != 200 || r.Outcome != record.OutcomeOK {
		t.Fatalf("status %d record %+v", resp.StatusCode, r)
	}
	resp = rawRequest(t, e.addr, fmt.Sprintf("GET http://evil.test:%d/small HTTP/1.1\r\nHost: x\r\n\r\n", e.httpPort))
	if r := e.sink.next(t); resp.StatusCode != 403 || r.Outcome != record.OutcomeRefused || r.Verdict != "deny" {
		t.Fatalf("status %d record %+v", resp.StatusCode, r)
	}
	a := newEnv(t, envOpt{mode: "audit"})
	resp = rawRequest(t, a.addr, fmt.Sprintf("GET http://evil.test:%d/small HTTP/1.1\r\nHost: x\r\n\r\n", a.httpPort))
	if r := a.sink.next(t); resp.StatusCode != 200 || r.Outcome != record.OutcomeOK || !r.WouldDeny {
		t.Fatalf("status %d record %+v", resp.StatusCode, r)
	}
}

// TestUpstreamFailsInsideBody: an origin that dies inside its response
// body: the client's response is cut (never completed as if whole) and the
// record says upstream-error, the decision untouched.
func TestUpstreamFailsInsideBody(t *testing.T) {
	for _, tc := range []struct{ name, answer string }{
		{"Content-Length framing", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"},
		{"chunked framing", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := listen(t, "127.0.0.1:0")
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
							return
						}
						io.WriteString(c, tc.answer)
					}()
				}
			}()
			port := ln.Addr().(*net.TCPAddr).Port
			e := newEnv(t, envOpt{extra: rule(port)})
			c := dialFrom(t, podIP, e.addr)
			fmt.Fprintf(c, "GET http://models.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", port)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				t.Fatalf("a cut body looks whole: %q", b)
			}
			r := e.sink.next(t)
			if r.Outcome != record.OutcomeUpstreamError || r.Verdict != "allow" || r.Reason != "allowed" || r.BytesReceived != 10 || r.Error == "" {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

// TestHTTPBodyIdleTimeout: a streamed response that stops moving is ended
// after IdleTimeout, with outcome idle-timeout.
func TestHTTPBodyIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	origin := listen(t, "127.0.0.1:0")
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: 1\n\n"))
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})}
	go srv.Serve(origin)
	t.Cleanup(func() { srv.Close() })
	port := origin.Addr().(*net.TCPAddr).Port
	e := newEnv(t, envOpt{extra: rule(port), idle: 200 * time.Millisecond})
	c := dialFrom(t, podIP, e.addr)
	fmt.Fprintf(c, "GET http://models.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body) // ends when the proxy cuts the stream
	r := e.sink.next(t)
	if !strings.HasPrefix(string(b), "data: 1") || r.Outcome != record.OutcomeIdleTimeout || r.Verdict != "allow" {
		t.Fatalf("body %q record %+v", b, r)
	}
}
