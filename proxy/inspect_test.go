package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// inspectRules inspect inspect.test (GET /small, /redirect, /hold, /stall,
// /drip) and wrongname.test, whose origin certificate does not name it.
const inspectRules = `  - hosts: ["inspect.test"]
    ports: [{tls}]
    cidrs: ["127.0.0.0/8"]
    inspect: true
    http:
    - methods: [GET]
      paths: ["/small", "/redirect", "/hold", "/stall", "/drip"]
  - hosts: ["wrongname.test"]
    ports: [{tls}]
    cidrs: ["127.0.0.0/8"]
    inspect: true
`

// inspectEnv is an env whose proxy inspects with a CA of its own; the
// origins' CA is the engine's upstream root.
type inspectEnv struct {
	*env
	ica *certs.CA
}

// newInspectEnv's extra rules are inspectRules unless o says others.
func newInspectEnv(t testing.TB, o envOpt) *inspectEnv {
	t.Helper()
	ica, err := certs.NewCA("egressd inspection test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := inspect.NewLeaves(ica, inspect.LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ie := &inspectEnv{ica: ica}
	if o.extra == "" {
		o.extra = inspectRules
	}
	o.inspect = func(origins *certs.CA, cfg Config) *inspect.Engine {
		eng, err := inspect.New(cfg.Inspection(inspect.Config{Leaves: leaves, Roots: origins.CertPool()}))
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	ie.env = newEnv(t, o)
	return ie
}

// tunnel opens a CONNECT tunnel from the test pod to host on the TLS
// origin's port and returns a TLS client (http/1.1) on it that trusts
// roots, not yet handshaken.
func (ie *inspectEnv) tunnel(t *testing.T, host string, roots *x509.CertPool) *tls.Conn {
	t.Helper()
	c, resp := ie.connect(podIP, host+":"+strconv.Itoa(ie.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d", host, resp.StatusCode)
	}
	return tls.Client(c, &tls.Config{ServerName: host, RootCAs: roots, NextProtos: []string{"http/1.1"}})
}

// client is an HTTP client from the test pod through the proxy that
// trusts the inspection CA only.
func (ie *inspectEnv) client(h2 bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: ie.addr}),
		DialContext:       d.DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: ie.ica.CertPool()},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	ie.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (ie *inspectEnv) url(host, path string) string {
	return "https://" + host + ":" + strconv.Itoa(ie.tlsPort) + path
}

// TestInspectedTunnel: requests inside one inspected tunnel are decided one
// by one (allowed, path-not-allowed, method-not-allowed), answered inside
// the tunnel, and recorded each (kind inspected, tunnel = the tunnel's
// id); the tunnel's record says tls.inspected with the origin certificate
// and counts the requests. Over HTTP/1.1 and HTTP/2.
func TestInspectedTunnel(t *testing.T) {
	for _, tt := range []struct {
		name  string
		h2    bool
		proto string
	}{
		{"http1", false, "HTTP/1.1"},
		{"http2", true, "HTTP/2.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{})
			c := ie.client(tt.h2)
			steps := []struct {
				method, path string
				status       int
				reason       string
				redirect     string
			}{
				{"GET", "/small", 200, "allowed", ""},
				{"GET", "/w.bin", 403, "path-not-allowed", ""},
				{"POST", "/small", 403, "method-not-allowed", ""},
				{"GET", "/redirect?to=https://cdn.blob.test/w.bin%3Fsig%3Dsecret", 302, "allowed", "cdn.blob.test"},
				{"GET", "/small?token=secret", 200, "allowed", ""},
			}
			var tunnel string
			for _, s := range steps {
				req, _ := http.NewRequest(s.method, ie.url("inspect.test", s.path), nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", s.method, s.path, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != s.status {
					t.Fatalf("%s %s: status %d; want %d", s.method, s.path, resp.StatusCode, s.status)
				}
				if s.status == 403 && resp.Header.Get("X-Egressd-Reason") != s.reason {
					t.Fatalf("%s %s: X-Egressd-Reason %q; want %q", s.method, s.path, resp.Header.Get("X-Egressd-Reason"), s.reason)
				}
				if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "egressd inspection test CA" {
					t.Fatalf("%s %s: not served with egressd's leaf", s.method, s.path)
				}
				r := ie.sink.next(t)
				if r.Kind != record.KindInspected || r.HTTP == nil {
					t.Fatalf("record %+v; want kind inspected with http", r)
				}
				if tunnel == "" {
					tunnel = r.Tunnel
				}
				switch {
				case r.Tunnel == "" || r.Tunnel != tunnel:
					t.Fatalf("%s %s: tunnel %q; want one tunnel %q for all", s.method, s.path, r.Tunnel, tunnel)
				case r.HTTP.Method != s.method || r.HTTP.Status != s.status || r.HTTP.Proto != tt.proto:
					t.Fatalf("%s %s: http %+v; want status %d proto %s", s.method, s.path, *r.HTTP, s.status, tt.proto)
				case r.Reason != s.reason || r.HTTP.RedirectHost != s.redirect:
					t.Fatalf("%s %s: reason %q redirect_host %q; want %q %q", s.method, s.path, r.Reason, r.HTTP.RedirectHost, s.reason, s.redirect)
				case r.HTTP.Path != "":
					t.Fatalf("path %q recorded without --audit-http-path full", r.HTTP.Path)
				case r.Policy != "llm-prod/llm-bootstrap" || r.Rule == nil || *r.Rule != 4:
					t.Fatalf("%s %s: decided by %s rule %v; want llm-prod/llm-bootstrap rule 4", s.method, s.path, r.Policy, r.Rule)
				case s.status == 200 && (r.Outcome != record.OutcomeOK || r.BytesReceived != 2):
					t.Fatalf("%s %s: outcome %q bytes_received %d; want ok, 2", s.method, s.path, r.Outcome, r.BytesReceived)
				case s.status == 403 && r.Outcome != record.OutcomeRefused:
					t.Fatalf("%s %s: outcome %q; want refused", s.method, s.path, r.Outcome)
				}
			}
			c.Transport.(*http.Transport).CloseIdleConnections()
			r := ie.sink.next(t)
			switch {
			case r.ID != tunnel || r.Kind != record.KindConnect:
				t.Fatalf("tunnel record %+v; want kind connect, id %s", r, tunnel)
			case r.TLS == nil || !r.TLS.Inspected || r.TLS.OriginCert == nil:
				t.Fatalf("tunnel tls %+v; want inspected with origin_cert", r.TLS)
			case !strings.Contains(r.TLS.OriginCert.Issuer, "egressd proxy test") || r.TLS.OriginCert.NotAfter.IsZero():
				t.Fatalf("origin_cert %+v; want the origin's, issued by the origins' CA", *r.TLS.OriginCert)
			case r.Requests != int64(len(steps)) || r.Outcome != record.OutcomeOK || r.BytesSent == 0 || r.BytesReceived == 0:
				t.Fatalf("tunnel requests %d outcome %q bytes %d/%d; want %d, ok, bytes both ways", r.Requests, r.Outcome, r.BytesSent, r.BytesReceived, len(steps))
			}
			all := ie.sink.bytes()
			for _, secret := range [][]byte{[]byte("secret"), keyBody(ie.ica.KeyPEM())} {
				if bytes.Contains(all, secret) {
					t.Fatalf("records hold %q:\n%s", secret, all)
				}
			}
		})
	}
}

// keyBody is the base64 body of a PEM key, the part that would leak.
func keyBody(pemKey []byte) []byte {
	lines := bytes.Split(pemKey, []byte("\n"))
	return lines[1]
}

// TestBlindRuleNotInspected: a host that no inspecting rule names is
// relayed blind: the client sees the origin's own certificate.
func TestBlindRuleNotInspected(t *testing.T) {
	ie := newInspectEnv(t, envOpt{})
	tc := ie.tunnel(t, "models.test", ie.ca.CertPool())
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the origin's own certificate: %v", err)
	}
	if iss := tc.ConnectionState().PeerCertificates[0].Issuer.CommonName; iss != "egressd proxy test" {
		t.Fatalf("issuer %q; want the origin's CA", iss)
	}
	tc.Close()
	r := ie.sink.next(t)
	if r.TLS == nil || r.TLS.Inspected || r.Requests != 0 {
		t.Fatalf("record tls %+v requests %d; want a blind tunnel", r.TLS, r.Requests)
	}
}

// TestInspectedUpstreamTLSFailed: an origin whose certificate does not
// name the host is never presented: the client's handshake fails and the
// tunnel's record says upstream-tls-failed with the class.
func TestInspectedUpstreamTLSFailed(t *testing.T) {
	ie := newInspectEnv(t, envOpt{})
	_, err := ie.client(false).Get(ie.url("wrongname.test", "/small"))
	if err == nil {
		t.Fatal("an origin that failed verification was presented")
	}
	r := ie.sink.next(t)
	switch {
	case r.Outcome != record.OutcomeUpstreamTLSFailed:
		t.Fatalf("outcome %q; want upstream-tls-failed (record %+v)", r.Outcome, r)
	case !strings.Contains(r.Error, "hostname-mismatch"):
		t.Fatalf("error %q; want the class hostname-mismatch", r.Error)
	case r.Verdict != "allow":
		t.Fatalf("verdict %q: the decision stays allow, the outcome says what failed", r.Verdict)
	}
}

// TestInspectedClientTLSFailed: a client that does not trust the
// inspection CA fails its handshake; the tunnel's record says
// client-tls-failed, not ok.
func TestInspectedClientTLSFailed(t *testing.T) {
	ie := newInspectEnv(t, envOpt{})
	tc := ie.tunnel(t, "inspect.test", ie.ca.CertPool())
	if err := tc.Handshake(); err == nil {
		t.Fatal("a client that trusts only the origins' CA accepted egressd's leaf")
	}
	tc.Close()
	if r := ie.sink.next(t); r.Outcome != record.OutcomeClientTLSFailed || r.Verdict != "allow" {
		t.Fatalf("record outcome %q verdict %q; want client-tls-failed, allow", r.Outcome, r.Verdict)
	}
}

// TestInspectedTunnelRevoked: a policy change that no longer allows the
// host cuts an inspected tunnel like any other (outcome revoked).
func TestInspectedTunnelRevoked(t *testing.T) {
	ie := newInspectEnv(t, envOpt{})
	c := ie.client(false)
	resp, err := c.Get(ie.url("inspect.test", "/small"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if r := ie.sink.next(t); r.Kind != record.KindInspected {
		t.Fatalf("record %+v; want the inspected exchange", r)
	}
	ie.setPolicy(t, "")
	ie.p.Revalidate()
	r := ie.sink.next(t)
	if r.Kind != record.KindConnect || r.Outcome != record.OutcomeRevoked || r.Requests != 1 {
		t.Fatalf("record kind %q outcome %q requests %d; want the tunnel, revoked, 1 request", r.Kind, r.Outcome, r.Requests)
	}
	// The next request needs a new tunnel, which the new policy refuses.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ie.url("inspect.test", "/small"), nil)
	if _, err := c.Do(req); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request after revocation: %v; want the proxy's refusal", err)
	}
}

// TestInspectedSNIListener: the transparent SNI listener hands an
// inspecting rule's connection to the engine the same way: the client is
// served egressd's leaf and each request is recorded.
func TestInspectedSNIListener(t *testing.T) {
	ie := newInspectEnv(t, envOpt{})
	ln := listen(t, "127.0.0.1:0")
	go ie.p.ServeSNI(ln, ie.tlsPort)
	c := dialFrom(t, podIP, ln.Addr().String())
	tc := tls.Client(c, &tls.Config{ServerName: "inspect.test", RootCAs: ie.ica.CertPool(), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with egressd's leaf: %v", err)
	}
	io.WriteString(tc, "GET /w.bin HTTP/1.1\r\nHost: inspect.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Egressd-Reason") != "path-not-allowed" {
		t.Fatalf("status %d reason %q; want 403 path-not-allowed", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
	}
	r := ie.sink.next(t)
	if r.Kind != record.KindInspected || r.Reason != "path-not-allowed" || r.Tunnel == "" {
		t.Fatalf("record %+v; want the inspected, refused exchange", r)
	}
	tc.Close()
	if r := ie.sink.next(t); r.Kind != record.KindSNI || r.TLS == nil || !r.TLS.Inspected || r.Requests != 1 {
		t.Fatalf("tunnel record %+v; want kind sni, inspected, 1 request", r)
	}
}

// BenchmarkConnectTLSInspectConfigured is BenchmarkConnectTLS with an
// inspection engine configured and a blind rule deciding: the tunnel pays
// one field check of its decision, so its allocations are
// BenchmarkConnectTLS's.
//
//	go test -run '^$' -bench 'ConnectTLS' -benchtime 500x -benchmem ./proxy/
func BenchmarkConnectTLSInspectConfigured(b *testing.B) {
	ie := newInspectEnv(b, envOpt{discardAudit: true, maxConns: -1})
	target := fmt.Sprintf("models.test:%d", ie.tlsPort)
	connectReq := []byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	getReq := []byte("GET /small HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n")
	tcfg := &tls.Config{ServerName: "models.test", RootCAs: ie.ca.CertPool(), NextProtos: []string{"http/1.1"}}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := connectOnce(&d, ie.addr, connectReq, getReq, tcfg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInspectedHostMismatch: a later request of an inspected tunnel whose
// Host names another site is refused host-mismatch in enforce mode, and
// passes with would_deny in audit mode (Decision.Deny, as on the plain
// HTTP path); the tunnel stays up for the next request either way.
func TestInspectedHostMismatch(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mode      policy.Mode
		status    int
		verdict   string
		wouldDeny bool
	}{
		{"enforce", policy.ModeEnforce, 403, "deny", false},
		{"audit", policy.ModeAudit, 200, "allow", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{mode: tt.mode})
			tc := ie.tunnel(t, "inspect.test", ie.ica.CertPool())
			br := bufio.NewReader(tc)
			for i, host := range []string{"inspect.test", "evil.test", "inspect.test"} {
				fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want, verdict, wd := 200, "allow", false
				if host == "evil.test" {
					want, verdict, wd = tt.status, tt.verdict, tt.wouldDeny
				}
				r := ie.sink.next(t)
				if resp.StatusCode != want || r.Verdict != verdict || r.WouldDeny != wd || (host == "evil.test") != (r.Reason == "host-mismatch") {
					t.Fatalf("request %d Host %s: status %d, record verdict %s would_deny %v reason %s; want %d %s %v",
						i, host, resp.StatusCode, r.Verdict, r.WouldDeny, r.Reason, want, verdict, wd)
				}
			}
		})
	}
}
