package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"testing"

	"github.com/egressd/egressd/internal/testutil"
)

// newPEMCA makes a self-signed CA with key (nil means a fresh ECDSA P-256
// one); edit changes its template before signing.
func newPEMCA(t testing.TB, name string, key crypto.Signer, edit func(*x509.Certificate)) *testutil.PEMCA {
	t.Helper()
	if key == nil {
		key = mustKey(t, "ecdsa")
	}
	return testutil.NewPEMCA(t, name, key, edit)
}

// mustKey returns a fresh key of kind "ecdsa" (P-256), "ecdsa-p384",
// "rsa" (2048 bits) or "ed25519".
func mustKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	switch kind {
	case "ecdsa":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ecdsa-p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "rsa":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}
