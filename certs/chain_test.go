package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

// TestIntermediateCA: egressd's CA as cert-manager makes it from a CA
// Issuer is an intermediate, and its tls.crt may carry the issuer's own
// intermediates after it. Every leaf is sent with that whole chain, so a
// client that trusts only the root completes a real handshake; the
// chain's order is leaf, CA, then the file's order.
func TestIntermediateCA(t *testing.T) {
	root := newPEMCA(t, "org root", nil, nil)
	mid := root.NewSub(t, "org issuing CA", mustKey(t, "ecdsa"))
	egressd := mid.NewSub(t, "egressd inspection CA", mustKey(t, "ecdsa"))
	for _, tc := range []struct {
		name    string
		certPEM []byte
		chain   int // certificates after the leaf
		trusted bool
	}{
		{"CA and its issuer", append(bytes.Clone(egressd.CertPEM), mid.CertPEM...), 2, true},
		{"CA, issuer and the root", append(append(bytes.Clone(egressd.CertPEM), mid.CertPEM...), root.CertPEM...), 3, true},
		{"CA alone: the issuer is missing", egressd.CertPEM, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := LoadCA(tc.certPEM, egressd.KeyPEM, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			leaf, err := ca.IssueWith(LeafConfig{Hosts: []string{"api.llm.test"}, ServerOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(leaf.Certificate) - 1; got != tc.chain {
				t.Fatalf("%d certificates after the leaf, want %d", got, tc.chain)
			}
			if !bytes.Equal(leaf.Certificate[1], egressd.Cert.Raw) {
				t.Fatal("the CA's certificate does not follow the leaf")
			}
			roots := x509.NewCertPool()
			roots.AddCert(root.Cert)
			err = handshake(t, leaf, &tls.Config{RootCAs: roots, ServerName: "api.llm.test"})
			if tc.trusted != (err == nil) {
				t.Fatalf("handshake trusting only the root: %v, want trusted=%v", err, tc.trusted)
			}
		})
	}
}

// TestIntermediateCABadChain: a block after the CA's that is not a
// certificate is refused at load.
func TestIntermediateCABadChain(t *testing.T) {
	ca := newPEMCA(t, "egressd inspection CA", nil, nil)
	junk := append(bytes.Clone(ca.CertPEM), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")...)
	if _, err := LoadCA(junk, ca.KeyPEM, time.Now()); err == nil {
		t.Fatal("a chain with an unparsable certificate loaded")
	}
}

// handshake serves leaf on a loopback listener and returns the client's
// handshake error under cfg.
func handshake(t *testing.T, leaf tls.Certificate, cfg *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err == nil {
		c.Close()
	}
	return err
}
