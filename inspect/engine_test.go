package inspect

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

func do(t *testing.T, c *http.Client, method, url, host string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-client-secret-token")
	req.Header.Set("Cookie", "session=client-cookie-secret")
	req.Header.Set("X-Api-Key", "client-api-key-secret")
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestInspectedTunnel: allowed and denied requests in one tunnel, over
// HTTP/1.1 and HTTP/2, each recorded with its status; the tunnel stays
// up after a refusal; the redirect target is recorded exactly.
func TestInspectedTunnel(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			h := newHarness(t, harnessOpts{recordPath: true})
			c := h.goClient(proto == "HTTP/2.0")
			steps := []struct {
				method, path string
				status       int
				reason       string // X-Egressd-Reason; "" for the origin's answer
			}{
				{"POST", "/v1/chat/completions?stream=true&key=query-secret", 200, ""},
				{"GET", "/v1/chat/completions", 403, "method-not-allowed"},
				{"POST", "/v1/files", 403, "path-not-allowed"},
				{"GET", "/v1/models", 200, ""},
				{"GET", "/v1/models/a/../../admin", 403, "bad-request"},
				{"GET", "/dl/weights.bin", 302, ""},
				{"GET", "/dl/relative", 301, ""},
				{"GET", "/dl/forbidden", 403, ""},
				{"DELETE", "/status/404", 404, ""},
				{"GET", "/v1/models", 200, ""},
				{"GET", "/dl/ambiguous", 302, ""},
			}
			reused := 0
			for _, s := range steps {
				req, _ := http.NewRequest(s.method, h.originURL(s.path), nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) {
						if i.Reused {
							reused++
						}
					},
				}))
				req.Header.Set("Authorization", "Bearer sk-client-secret-token")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", s.method, s.path, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != s.status || resp.Header.Get("X-Egressd-Reason") != s.reason || resp.Proto != proto {
					t.Fatalf("%s %s: %s %d reason %q; want %s %d %q", s.method, s.path, resp.Proto, resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), proto, s.status, s.reason)
				}
			}
			if reused != len(steps)-1 {
				t.Fatalf("%d of %d requests reused the tunnel; want all but the first", reused, len(steps))
			}
			c.CloseIdleConnections()
			h.wait()
			if len(h.tunnels) != 1 || !h.tunnels[0].Inspected || h.tunnels[0].Requests != int64(len(steps)) || h.tunnels[0].Outcome != OutcomeOK {
				t.Fatalf("tunnels %+v; want one inspected with %d requests", h.tunnels, len(steps))
			}
			tun := h.tunnels[0]
			if !strings.Contains(tun.Origin.Subject, testHost) || !strings.Contains(tun.Origin.Issuer, "origin CA") || tun.Origin.NotAfter.IsZero() {
				t.Fatalf("origin cert %+v", tun.Origin)
			}
			if len(h.exchanges) != len(steps) {
				t.Fatalf("%d exchanges recorded; want %d", len(h.exchanges), len(steps))
			}
			for i, s := range steps {
				x := h.exchanges[i]
				if x.Method != s.method || x.Status != s.status || x.Proto != proto || x.Path != strings.SplitN(s.path, "?", 2)[0] {
					t.Errorf("exchange %d %+v; want %s %s %d", i, x, s.method, s.path, s.status)
				}
				if want := s.reason == ""; x.Verdict.Allow != want {
					t.Errorf("exchange %d verdict %+v", i, x.Verdict)
				}
			}
			if x := h.exchanges[5]; x.RedirectHost != "blob.example.net" {
				t.Errorf("302 redirect_host %q; want blob.example.net", x.RedirectHost)
			}
			if x := h.exchanges[6]; x.RedirectHost != testHost || x.RedirectAmbiguous {
				t.Errorf("301 relative redirect_host %q ambiguous %v; want %s", x.RedirectHost, x.RedirectAmbiguous, testHost)
			}
			// "/\evil.example/weights.bin": a path to net/url and curl,
			// evil.example to browsers and fetch (issue 25).
			if x := h.exchanges[10]; x.RedirectHost != "evil.example" || !x.RedirectAmbiguous {
				t.Errorf("302 /\\ redirect_host %q ambiguous %v; want evil.example, ambiguous", x.RedirectHost, x.RedirectAmbiguous)
			}
			if x := h.exchanges[0]; x.BytesSent != int64(len(`{"ok":true}`)) {
				t.Errorf("bytes sent %d", x.BytesSent)
			}
			assertNoSecrets(t, h)
		})
	}
}

// TestRequestBody: a request body reaches the origin whole and is
// counted, over HTTP/1.1 and HTTP/2.
func TestRequestBody(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			body := strings.Repeat("x", 300<<10)
			c := h.goClient(proto == "HTTP/2.0")
			resp, err := c.Post(h.originURL("/v1/chat/completions"), "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Body-Bytes") != fmt.Sprint(len(body)) {
				t.Fatalf("%d, origin read %q bytes; want 200, %d", resp.StatusCode, resp.Header.Get("X-Body-Bytes"), len(body))
			}
			c.CloseIdleConnections()
			h.wait()
			if len(h.exchanges) != 1 || h.exchanges[0].BytesReceived != int64(len(body)) {
				t.Fatalf("exchanges %+v; want one with %d bytes received", h.exchanges, len(body))
			}
		})
	}
}

// assertNoSecrets greps every record and error for what must never be in
// them: credentials, cookies, query strings and the inspection CA's key.
func assertNoSecrets(t *testing.T, h *harness) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(h.inspCA.key)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"sk-client-secret-token", "client-cookie-secret", "client-api-key-secret", "origin-set-cookie-secret",
		"query-secret", "signed-url-secret", "sig=", "PRIVATE KEY", fmt.Sprintf("%x", h.inspCA.key.D.Bytes()),
		string(h.inspCA.keyPEM[40:80]), fmt.Sprintf("%x", der[len(der)-40:])}
	for _, line := range h.records() {
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("a record or error holds %q: %s", s, line)
			}
		}
	}
}

// TestHostMismatch: SNI X with Host or :authority Y is refused
// host-mismatch on the first request and on a later one, and the tunnel
// stays up for the next good request.
func TestHostMismatch(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			c := h.goClient(proto == "HTTP/2.0")
			_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
			for i, tt := range []struct {
				host string // "" sends the URL's authority
				ok   bool
			}{
				{"other.tenant.example", false}, // on the first request
				{"", true},
				{"evil.example:" + port, false},                 // on a later one
				{strings.ToUpper(testHost) + ".:" + port, true}, // case and a trailing dot name the same host
				{testHost + ":1", false},                        // another port of the host
				{"", true},
			} {
				resp, _ := do(t, c, "GET", h.originURL("/v1/models"), tt.host)
				wantStatus, wantReason := 403, "host-mismatch"
				if tt.ok {
					wantStatus, wantReason = 200, ""
				}
				if resp.StatusCode != wantStatus || resp.Header.Get("X-Egressd-Reason") != wantReason {
					t.Fatalf("request %d Host %q: %d %q; want %d %q", i, tt.host, resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), wantStatus, wantReason)
				}
			}
			c.CloseIdleConnections()
			h.wait()
			if len(h.tunnels) != 1 {
				t.Fatalf("%d tunnels; want 1 (refusals keep the tunnel)", len(h.tunnels))
			}
		})
	}
}

// TestOriginCertificateRefused: an origin whose certificate fails
// verification is never presented; the tunnel ends upstream-tls-failed
// with the verifier's class.
func TestOriginCertificateRefused(t *testing.T) {
	tests := []struct {
		name  string
		opts  harnessOpts
		class string
	}{
		{"expired", harnessOpts{originCert: func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}}, "expired"},
		{"wrong name", harnessOpts{originName: "other.example"}, "hostname-mismatch"},
		{"untrusted", harnessOpts{untrusted: true}, "unknown-authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			for _, h2 := range []bool{false, true} {
				req, _ := http.NewRequest("GET", h.originURL("/v1/models"), nil)
				resp, err := h.goClient(h2).Do(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("h2=%v: the request succeeded (%d) past an origin that fails verification", h2, resp.StatusCode)
				}
			}
			h.wait()
			if len(h.tunnels) != 2 {
				t.Fatalf("%d tunnels", len(h.tunnels))
			}
			for _, tun := range h.tunnels {
				if tun.Inspected || tun.Outcome != OutcomeUpstreamTLSFailed || tun.VerifyError != tt.class || tun.Requests != 0 {
					t.Fatalf("tunnel %+v; want upstream-tls-failed, class %s", tun, tt.class)
				}
			}
			if len(h.exchanges) != 0 {
				t.Fatalf("exchanges %+v", h.exchanges)
			}
			assertNoSecrets(t, h)
		})
	}
}

// rawTunnel opens a CONNECT tunnel through the harness and a TLS
// connection inside it that trusts the inspection CA, speaking HTTP/1.1.
func rawTunnel(t *testing.T, h *harness, sni string) (*tls.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", h.proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %[1]s:%[2]s\r\n\r\n", testHost, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: h.inspCA.pool(), NextProtos: []string{"http/1.1"}})
	return tc, tc.Handshake()
}

// TestSmugglingShapes: request heads two parsers could frame differently
// are refused 400 bad-request, as on the plain-HTTP path.
func TestSmugglingShapes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	host := testHost + ":" + port
	tests := []struct {
		name, head string
	}{
		{"CL and TE", "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"TE not chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
		{"two TE", "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"obs-fold", "GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nX-A: 1\r\n folded\r\n\r\n"},
		{"duplicate Host", "GET /v1/models HTTP/1.1\r\nHost: " + host + "\r\nHost: other.example\r\n\r\n"},
		{"space before colon", "GET /v1/models HTTP/1.1\r\nHost : other.example\r\nHost: " + host + "\r\n\r\n"},
		{"bare LF", "GET /v1/models HTTP/1.1\nHost: " + host + "\r\n\r\n"},
		{"CL disagree", "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"CL not digits", "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: +1\r\n\r\na"},
		{"TE on HTTP/1.0", "POST /v1/chat/completions HTTP/1.0\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := rawTunnel(t, h, testHost)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(tc, tt.head); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 400 || resp.Header.Get("X-Egressd-Reason") != "bad-request" {
				t.Fatalf("%d %q; want 400 bad-request", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
		})
	}
	t.Run("clean head passes", func(t *testing.T) {
		tc, err := rawTunnel(t, h, testHost)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(tc, "GET /v1/models HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
	})
}

// TestSNIMismatchAndECHRefused: the client's SNI must be the tunnel's
// host.
func TestSNIMismatchRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if _, err := rawTunnel(t, h, "other.example"); err == nil {
		t.Fatal("a handshake with another SNI succeeded")
	}
	h.wait()
	if len(h.tunnels) != 1 || h.tunnels[0].Outcome != OutcomeRefused || h.tunnels[0].Inspected {
		t.Fatalf("tunnels %+v", h.tunnels)
	}
}

// echConfigList builds an ECHConfigList (RFC 9849 §4) with a fresh X25519
// key and publicName as the outer SNI, for a client to send ECH with.
func echConfigList(t *testing.T, publicName string) []byte {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u16 := func(b []byte, v int) []byte { return append(b, byte(v>>8), byte(v)) }
	pub := k.PublicKey().Bytes()
	var c []byte
	c = append(c, 1)                        // config_id
	c = u16(c, 0x20)                        // DHKEM(X25519, HKDF-SHA256)
	c = append(u16(c, len(pub)), pub...)    // public_key
	c = u16(u16(u16(c, 4), 1), 1)           // cipher_suites: HKDF-SHA256, AES-128-GCM
	c = append(c, 0, byte(len(publicName))) // maximum_name_length, public_name
	c = append(c, publicName...)
	c = u16(c, 0) // no extensions
	cfg := append(u16(u16(nil, extECH), len(c)), c...)
	return append(u16(nil, len(cfg)), cfg...)
}

// TestECHRefused: a ClientHello with Encrypted Client Hello is refused in
// an inspected tunnel as in every other (reason ech upstream of the
// engine; the engine refuses it again).
func TestECHRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, err := net.Dial("tcp", h.proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %[1]s:443\r\n\r\n", testHost)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: testHost, RootCAs: h.inspCA.pool(), MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: echConfigList(t, testHost)})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a ClientHello with ECH was served")
	}
	h.wait()
	if len(h.tunnels) != 1 || h.tunnels[0].Outcome != OutcomeRefused || h.tunnels[0].Inspected {
		t.Fatalf("tunnels %+v", h.tunnels)
	}
	if !errors.Is(h.errs[0], ErrECH) {
		t.Fatalf("error %v; want ErrECH", h.errs[0])
	}
}

// TestNotInspectedHost: a host no inspecting rule names is never
// inspected (the harness refuses it; the proxy relays it blind).
func TestNotInspectedHost(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	req, _ := http.NewRequest("GET", "https://blind.example/", nil)
	if resp, err := h.goClient(false).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a host without an inspecting rule got a leaf")
	}
	if h.engine.cfg.Leaves.Minted() != 0 {
		t.Fatalf("%d leaves minted", h.engine.cfg.Leaves.Minted())
	}
}
