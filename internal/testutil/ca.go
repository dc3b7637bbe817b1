package testutil

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// PEMCA is a CA certificate made for one test, the way an operator hands
// one to egressd: the parsed certificate, and both it and its key in PEM.
type PEMCA struct {
	Cert            *x509.Certificate
	Key             crypto.Signer
	CertPEM, KeyPEM []byte
}

// NewPEMCA self-signs a CA certificate for name with key: CA:TRUE,
// keyCertSign, valid from an hour ago for 30 days. edit, when not nil,
// changes the template before signing (the broken CAs a loader must
// refuse). The key is written as PKCS #8.
func NewPEMCA(t testing.TB, name string, key crypto.Signer, edit func(*x509.Certificate)) *PEMCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if edit != nil {
		edit(tmpl)
	}
	return sign(t, tmpl, tmpl, key, key)
}

// NewSub makes an intermediate CA for name with key, signed by p: the CA
// cert-manager makes from a CA Issuer (CA:TRUE, keyCertSign, 30 days).
func (p *PEMCA) NewSub(t testing.TB, name string, key crypto.Signer) *PEMCA {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(t, tmpl, p.Cert, key, p.Key)
}

// sign makes tmpl's certificate for key, signed by parent's key.
func sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) *PEMCA {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &PEMCA{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
}
