package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a self-signed CA that can sign leaves.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startOrigin serves "ok" on 127.0.0.1 over TLS (h2 and http/1.1) with a
// leaf for name; it returns the port.
func startOrigin(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	srv := &http.Server{
		Protocols: &protos,
		ErrorLog:  log.New(io.Discard, "", 0), // the untrusted origin's failed handshakes
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok "+r.Proto)
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestPeer drives the bench peer with Go's client over real listeners: the
// rule's CONNECT targets, the Host check, the dial's address check (by
// classification: 10.0.0.1 is refused before any dial) and the origin's
// verification.
func TestPeer(t *testing.T) {
	mint, originCA, otherCA := newTestCA(t, "mint"), newTestCA(t, "origin CA"), newTestCA(t, "other CA")
	dir := t.TempDir()
	keyDER, err := x509.MarshalECPrivateKey(mint.key)
	if err != nil {
		t.Fatal(err)
	}
	good := startOrigin(t, originCA.leaf(t, "origin.test"))
	untrusted := startOrigin(t, otherCA.leaf(t, "origin.test"))
	hosts := map[string]string{"origin.test": "127.0.0.1", "far.test": "10.0.0.1"}
	cfg := Config{
		CACert:     writeFile(t, dir, "mint.pem", mint.pem),
		CAKey:      writeFile(t, dir, "mint.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		UpstreamCA: writeFile(t, dir, "origin-ca.pem", originCA.pem),
		Allow:      []string{"origin.test:" + good, "origin.test:" + untrusted, "far.test:" + good},
		CIDRs:      []string{"127.0.0.0/8"},
		H2:         true,
		lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if a, ok := hosts[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, errors.New("no such host " + host)
		},
	}
	srv, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	proxyURL := &url.URL{Scheme: "http", Host: ln.Addr().String()}

	tests := []struct {
		name, url, host string
		h2              bool
		status          int    // 0: the request fails
		body, reason    string // reason: X-Egressd-Reason
		errHas          string
	}{
		{name: "allowed h1", url: "https://origin.test:" + good + "/", status: 200, body: "ok HTTP/1.1"},
		{name: "allowed h2 to h2", url: "https://origin.test:" + good + "/", h2: true, status: 200, body: "ok HTTP/2.0"},
		{name: "host names another host", url: "https://origin.test:" + good + "/", host: "other.test", status: 403, reason: "host-mismatch"},
		{name: "host names another port", url: "https://origin.test:" + good + "/", host: "origin.test:1", status: 403, reason: "host-mismatch"},
		{name: "host without port", url: "https://origin.test:" + good + "/", host: "Origin.Test.", status: 200, body: "ok HTTP/1.1"},
		{name: "h2 authority names another host", url: "https://origin.test:" + good + "/", host: "other.test", h2: true, status: 403, reason: "host-mismatch"},
		{name: "CONNECT to a port not in the rule", url: "https://origin.test:1/", errHas: "Forbidden"},
		{name: "CONNECT to a host not in the rule", url: "https://other.test:" + good + "/", errHas: "Forbidden"},
		{name: "plain HTTP is not inspected", url: "http://origin.test:" + good + "/", status: 403, reason: "not-inspected"},
		// goproxy closes an HTTP/1.1 tunnel whose round trip failed (no
		// response), and answers 502 on an h2 stream.
		{name: "origin from an untrusted CA, h1", url: "https://origin.test:" + untrusted + "/", errHas: "EOF"},
		{name: "origin from an untrusted CA, h2", url: "https://origin.test:" + untrusted + "/", h2: true, status: 502},
		{name: "name resolving outside the ranges, h1", url: "https://far.test:" + good + "/", errHas: "EOF"},
		{name: "name resolving outside the ranges, h2", url: "https://far.test:" + good + "/", h2: true, status: 502},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &http.Transport{
				Proxy:             http.ProxyURL(proxyURL),
				TLSClientConfig:   &tls.Config{RootCAs: mint.pool()},
				ForceAttemptHTTP2: tc.h2,
			}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if tc.status == 0 {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one with %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.status)
			}
			if tc.body != "" && string(b) != tc.body {
				t.Errorf("body %q, want %q", b, tc.body)
			}
			if got := resp.Header.Get("X-Egressd-Reason"); got != tc.reason {
				t.Errorf("X-Egressd-Reason %q, want %q", got, tc.reason)
			}
			if tc.status == 200 && resp.TLS != nil && resp.TLS.PeerCertificates[0].Issuer.CommonName != "mint" {
				t.Errorf("leaf issued by %q, want the minting CA", resp.TLS.PeerCertificates[0].Issuer.CommonName)
			}
		})
	}
}

// TestHostMatches is the Host check alone.
func TestHostMatches(t *testing.T) {
	tun := &tunnel{host: "up.bench.test", port: "18443"}
	tests := []struct {
		name, host string
		want       bool
	}{
		{"bare host", "up.bench.test", true},
		{"host and port", "up.bench.test:18443", true},
		{"case and trailing dot", "UP.bench.test.:18443", true},
		{"other port", "up.bench.test:18444", false},
		{"other host", "down.bench.test", false},
		{"suffix only", "bench.test", false},
		{"IP literal", "127.0.0.1:18443", false},
		{"empty", "", false},
		{"colon without port", "up.bench.test:", false},
		{"bracketed IPv6", "[::1]:18443", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tun.hostMatches(tc.host); got != tc.want {
				t.Errorf("hostMatches(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

// FuzzHostMatches: the Host check never panics, and whatever it accepts
// names the tunnel's host (case and one trailing dot aside) with no port
// or the tunnel's.
func FuzzHostMatches(f *testing.F) {
	for _, s := range []string{"up.bench.test", "up.bench.test:18443", "UP.bench.test.", "[::1]:18443", ":", "up.bench.test:", "a:b:c"} {
		f.Add(s)
	}
	tun := &tunnel{host: "up.bench.test", port: "18443"}
	f.Fuzz(func(t *testing.T, h string) {
		if !tun.hostMatches(h) {
			return
		}
		host := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(h), ":18443"), ".")
		if host != "up.bench.test" {
			t.Errorf("hostMatches(%q) accepted another host", h)
		}
	})
}
