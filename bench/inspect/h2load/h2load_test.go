package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// selfSigned is a leaf for name that is its own root.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// blindRelay is a CONNECT proxy that relays every tunnel to origin
// unopened: the client then sees the origin's own certificate and ALPN.
func blindRelay(t *testing.T, origin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				up, err := net.Dial("tcp", origin)
				if err != nil {
					return
				}
				defer up.Close()
				io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
				go io.Copy(up, br)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestBench runs every test of bench for both protocols, with small
// limits, through a blind relay to the origin.
func TestBench(t *testing.T) {
	cert, pool := selfSigned(t, "origin.test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newOrigin(cert)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	proxy := blindRelay(t, ln.Addr().String())
	lim := limits{conc: 4, dur: 5 * time.Second, max: 40, op: 5 * time.Second}
	noCPU := func() float64 { return -1 }

	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			c, err := newClient(proxy, "origin.test:"+port, proto, &tls.Config{RootCAs: pool, ServerName: "origin.test"}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rates := []struct {
				name string
				run  func(*client, limits, func() float64) *Rate
			}{{"ka1", runKA1}, {"ka", runKA}, {"nc", runNC}}
			for _, r := range rates {
				got := r.run(c, lim, noCPU)
				if got.Requests != lim.max || got.Errors != 0 {
					t.Errorf("%s: %d requests, %d errors (%s), want %d and 0", r.name, got.Requests, got.Errors, got.FirstErr, lim.max)
				}
			}
			thr := runThr(c, 3<<20, 2, noCPU)
			if len(thr.MBps) != 2 || thr.FirstErr != "" {
				t.Errorf("thr: %v, %s", thr.MBps, thr.FirstErr)
			}
		})
	}
}

// TestALPNMismatch: a tunnel that negotiates another protocol than the
// one asked for is an error, not a silent downgrade.
func TestALPNMismatch(t *testing.T) {
	cert, pool := selfSigned(t, "origin.test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newOrigin(cert)
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true) // HTTP/1.1 only
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c, err := newClient(blindRelay(t, ln.Addr().String()), "origin.test:"+port, "h2", &tls.Config{RootCAs: pool, ServerName: "origin.test"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.open(time.Now().Add(5 * time.Second))
	// Go's server refuses the handshake itself (no_application_protocol);
	// a server without ALPN would get open's own "ALPN" error.
	if err == nil || !strings.Contains(err.Error(), "application protocol") && !strings.Contains(err.Error(), "ALPN") {
		t.Fatalf("open = %v, want an ALPN error", err)
	}
}
