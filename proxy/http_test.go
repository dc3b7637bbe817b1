package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/egressd/egressd/record"
)

func TestForwardAbsoluteForm(t *testing.T) {
	e := newEnv(t, envOpt{})
	url := fmt.Sprintf("http://user:PASSWORD@models.test:%d/echo?sig=SECRETSIG", e.httpPort)
	out, stderr, err := curl(t, "-f", "--proxy", "http://"+e.addr, "--interface", podIP,
		"-H", "Authorization: Bearer AUTHSECRET", "-H", "Cookie: session=COOKIESECRET",
		"-H", "Proxy-Authorization: Basic PROXYSECRET", "-H", "Proxy-Foo: x",
		"-H", "Connection: X-Hop", "-H", "X-Hop: 1", "-H", "Keep-Alive: timeout=5", "-H", "TE: deflate",
		"-H", "Upgrade-Insecure-Requests: 1", url)
	if err != nil {
		t.Fatalf("curl: %v %s", err, stderr)
	}
	if out != "echo GET /echo" {
		t.Fatalf("body %q", out)
	}
	seen := <-e.seen
	for _, h := range []string{"Proxy-Authorization", "Proxy-Foo", "Proxy-Connection", "X-Hop", "Keep-Alive", "Te", "X-Forwarded-For"} {
		t.Run("origin lacks "+h, func(t *testing.T) {
			if v := seen.Get(h); v != "" {
				t.Fatalf("origin saw %s: %q", h, v)
			}
		})
	}
	t.Run("end-to-end headers pass", func(t *testing.T) {
		if seen.Get("Authorization") != "Bearer AUTHSECRET" || seen.Get("Upgrade-Insecure-Requests") != "1" {
			t.Fatalf("origin headers %v", seen)
		}
	})
	r := e.sink.next(t)
	t.Run("record", func(t *testing.T) {
		if r.Kind != record.KindHTTP || r.Verdict != "allow" || r.Reason != "allowed" || r.Outcome != record.OutcomeOK ||
			r.HTTP == nil || r.HTTP.Method != "GET" || r.HTTP.Path != "" || r.HTTP.Status != 200 || r.Peer == "" || r.BytesReceived == 0 {
			t.Fatalf("record %+v http %+v", r, r.HTTP)
		}
	})
	t.Run("redaction", func(t *testing.T) {
		all := e.sink.bytes()
		for _, s := range []string{"SECRETSIG", "PASSWORD", "AUTHSECRET", "COOKIESECRET", "PROXYSECRET"} {
			if bytes.Contains(all, []byte(s)) {
				t.Errorf("%s in audit log", s)
			}
		}
	})
}

func TestForwardRedirectHostRecorded(t *testing.T) {
	e := newEnv(t, envOpt{})
	url := fmt.Sprintf("http://models.test:%d/redirect?to=https://cdn.blob.test/x?sig=SECRETSIG", e.httpPort)
	if _, stderr, err := curl(t, "--proxy", "http://"+e.addr, "--interface", podIP, url); err != nil {
		t.Fatal(stderr)
	}
	r := e.sink.next(t)
	if r.HTTP == nil || r.HTTP.Status != 302 || r.HTTP.RedirectHost != "cdn.blob.test" {
		t.Fatalf("http %+v", r.HTTP)
	}
	if bytes.Contains(e.sink.bytes(), []byte("SECRETSIG")) {
		t.Fatal("query string in the audit log")
	}
}

// rawRequest sends raw bytes from the pod and returns the response.
func rawRequest(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	c := dialFrom(t, podIP, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, envOpt{})
	host := fmt.Sprintf("models.test:%d", e.httpPort)
	for _, tc := range []struct {
		name   string
		raw    string
		status int
	}{
		{"garbage request line", "GARBAGE\r\n\r\n", 400},
		{"oversized header", "GET http://" + host + "/ HTTP/1.1\r\nHost: " + host + "\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", 431},
		{"missing host", "GET http://" + host + "/ HTTP/1.1\r\n\r\n", 400},
		{"conflicting content-length", "POST http://" + host + "/echo HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
		{"https absolute-form", "GET https://" + host + "/ HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 400},
		{"origin-form on the proxy port", "GET /echo HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 400},
		{"upgrade on plain HTTP", "GET http://" + host + "/echo HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := rawRequest(t, e.addr, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			r := e.sink.next(t)
			if r.Reason != "bad-request" || r.Verdict != "deny" || r.Client.Pod != "llm-0" || r.HTTP == nil || r.HTTP.Status != tc.status {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

// TestSmugglingCLAndTE: a request framed by both Content-Length and
// Transfer-Encoding is refused before any dial (RFC 9112 §6.1 allows a
// server to let Transfer-Encoding win; refusing leaves no room for a
// parser that reads the other one), and the chunked body of a well-framed
// request reaches the origin re-framed by egressd.
func TestSmugglingCLAndTE(t *testing.T) {
	e := newEnv(t, envOpt{})
	host := fmt.Sprintf("models.test:%d", e.httpPort)
	t.Run("both framings refused", func(t *testing.T) {
		resp := rawRequest(t, e.addr, "POST http://"+host+"/echo HTTP/1.1\r\nHost: "+host+
			"\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
		r := e.sink.next(t)
		if resp.StatusCode != 400 || r.Reason != "bad-request" || r.Host != "models.test" || r.HTTP == nil || r.HTTP.Method != "POST" || e.dials.Load() != 0 {
			t.Fatalf("status %d record %+v", resp.StatusCode, r)
		}
	})
	t.Run("chunked alone is forwarded", func(t *testing.T) {
		resp := rawRequest(t, e.addr, "POST http://"+host+"/echo HTTP/1.1\r\nHost: "+host+
			"\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		seen := <-e.seen
		if seen.Get("X-Seen-Body") != "abc" || seen.Get("X-Seen-Content-Length") != "-1" {
			t.Fatalf("origin saw body %q length %q", seen.Get("X-Seen-Body"), seen.Get("X-Seen-Content-Length"))
		}
		r := e.sink.next(t)
		if r.BytesSent != 3 {
			t.Fatalf("bytes_sent %d", r.BytesSent)
		}
	})
}

func TestTransparentHTTPDecidesEachRequest(t *testing.T) {
	e := newEnv(t, envOpt{})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeTransparentHTTP(ln, e.httpPort)
	c := dialFrom(t, podIP, ln.Addr().String())
	br := bufio.NewReader(c)
	for _, tc := range []struct {
		name, host string
		status     int
		reason     string
	}{
		{"allowed host", "models.test", 200, "allowed"},
		{"next request on the same connection denied", "evil.test", 403, "not-allowlisted"},
		{"and allowed again", "models.test:80", 200, "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fmt.Fprintf(c, "GET /echo?sig=SECRETSIG HTTP/1.1\r\nHost: %s\r\n\r\n", tc.host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || tc.status == 403 && resp.Header.Get("X-Egressd-Reason") != tc.reason {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			if tc.status == 200 {
				<-e.seen
			}
			r := e.sink.next(t)
			if r.Kind != record.KindHTTP || r.Reason != tc.reason || r.Port != e.httpPort || r.HTTP.Path != "" {
				t.Fatalf("record %+v", r)
			}
		})
	}
	if bytes.Contains(e.sink.bytes(), []byte("SECRETSIG")) {
		t.Fatal("query string in the audit log")
	}
}

func TestTransparentSNI(t *testing.T) {
	e := newEnv(t, envOpt{})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeSNI(ln, e.tlsPort)
	sniPort := ln.Addr().(*net.TCPAddr).Port
	t.Run("curl via connect-to", func(t *testing.T) {
		url := fmt.Sprintf("https://models.test:%d/w.bin", e.tlsPort)
		out, stderr, err := curl(t, "-f", "--interface", podIP, "--cacert", e.caFile,
			"--connect-to", fmt.Sprintf("models.test:%d:127.0.0.1:%d", e.tlsPort, sniPort), url)
		if err != nil {
			t.Fatalf("curl: %v %s", err, stderr)
		}
		if out != string(weights) {
			t.Fatalf("body %d bytes", len(out))
		}
		r := e.sink.next(t)
		if r.Kind != record.KindSNI || r.Verdict != "allow" || r.Host != "models.test" || r.Port != e.tlsPort ||
			r.TLS == nil || r.TLS.SNI != "models.test" || r.TLS.Result != "established" || r.BytesReceived < int64(len(weights)) {
			t.Fatalf("record %+v tls %+v", r, r.TLS)
		}
	})
	t.Run("denied name", func(t *testing.T) {
		url := fmt.Sprintf("https://evil.test:%d/", e.tlsPort)
		if _, _, err := curl(t, "--interface", podIP, "--cacert", e.caFile,
			"--connect-to", fmt.Sprintf("evil.test:%d:127.0.0.1:%d", e.tlsPort, sniPort), url); err == nil {
			t.Fatal("curl succeeded")
		}
		r := e.sink.next(t)
		if r.Kind != record.KindSNI || r.Verdict != "deny" || r.Reason != "not-allowlisted" {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("no SNI", func(t *testing.T) {
		url := fmt.Sprintf("https://127.0.0.1:%d/", sniPort) // curl sends no SNI for an IP
		if _, _, err := curl(t, "--interface", podIP, "-k", url); err == nil {
			t.Fatal("curl succeeded")
		}
		r := e.sink.next(t)
		if r.Reason != "no-sni" || r.Verdict != "deny" {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("not TLS", func(t *testing.T) {
		c := dialFrom(t, podIP, ln.Addr().String())
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: models.test\r\n\r\n")
		io.Copy(io.Discard, c)
		r := e.sink.next(t)
		if r.Reason != "no-sni" || r.TLS == nil || r.TLS.Result != "not-tls" {
			t.Fatalf("record %+v", r)
		}
	})
}

// closeSignal reports its Close on closed.
type closeSignal struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeSignal) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestForwardLateDialAfterClientLeft: the Transport dials on a context that
// does not end with the request, so a dial may finish after the client left
// and the record was written. Its results must not reach the exchange then
// (a data race under -race, and a record mixing two moments), and there is
// exactly one record.
func TestForwardLateDialAfterClientLeft(t *testing.T) {
	e := newEnv(t, envOpt{})
	entered, release := make(chan struct{}), make(chan struct{})
	upClosed := make(chan struct{})
	inner := e.p.dial
	e.p.dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		close(entered)
		<-release // slow dial: returns after the client has gone
		c, err := inner(context.WithoutCancel(ctx), addr)
		if err != nil {
			return nil, err
		}
		return &closeSignal{Conn: c, closed: upClosed}, nil
	}
	c := dialFrom(t, podIP, e.addr)
	fmt.Fprintf(c, "GET http://models.test:%d/small HTTP/1.1\r\nHost: models.test:%d\r\n\r\n", e.httpPort, e.httpPort)
	<-entered
	c.Close()
	r := e.sink.next(t) // the handler ended and wrote the record
	if r.Error != "client aborted" || r.Peer != "" {
		t.Fatalf("record %+v", r)
	}
	close(release)
	<-upClosed // the late connection is closed, after the dial's last write
	select {
	case l := <-e.sink.lines:
		t.Fatalf("second record %s", l)
	default:
	}
}
