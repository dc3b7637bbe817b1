package inspect

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"
)

// CA is the inspection CA: the certificate workloads trust and the key
// that signs leaves. The key never leaves this type: no method returns or
// prints it.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// Certificate returns the CA certificate (what workloads trust).
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// LoadCAFiles reads --inspect-ca-cert and --inspect-ca-key (PEM) and
// checks them as LoadCA does.
func LoadCAFiles(certFile, keyFile string, now time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("inspect: CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("inspect: CA key: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM, now)
	if err != nil {
		return nil, fmt.Errorf("%w (certificate %s, key %s)", err, certFile, keyFile)
	}
	return ca, nil
}

// LoadCA parses a PEM CA certificate (the first CERTIFICATE block) and its
// PEM private key (PKCS #8, SEC 1 EC or PKCS #1 RSA) and refuses, with an
// error a person can act on: a key that is not the certificate's
// (ErrCAKeyMismatch), a certificate without CA:TRUE or keyCertSign
// (ErrNotCA), and one not valid at now (ErrCAExpired). Errors never hold
// key material.
func LoadCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	block := firstBlock(certPEM, "CERTIFICATE")
	if block == nil {
		return nil, fmt.Errorf("%w: no CERTIFICATE block in the CA certificate", ErrBadPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("inspect: CA certificate: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w (%s)", ErrCAKeyMismatch, cert.Subject)
	}
	switch {
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return nil, fmt.Errorf("%w: %s has no CA:TRUE basic constraint", ErrNotCA, cert.Subject)
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, fmt.Errorf("%w: %s lacks the keyCertSign key usage", ErrNotCA, cert.Subject)
	case now.Before(cert.NotBefore) || now.After(cert.NotAfter):
		return nil, fmt.Errorf("%w: %s is valid from %s to %s", ErrCAExpired, cert.Subject,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return &CA{cert: cert, key: key}, nil
}

// firstBlock returns the first PEM block of type typ (or, for typ "", of
// any type), skipping others.
func firstBlock(data []byte, typ string) *pem.Block {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if typ == "" || b.Type == typ {
			return b
		}
	}
}

// parseKey parses a PEM private key. Errors name the block type, never
// its bytes.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: no PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block in the CA key", ErrBadPEM)
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: CA key block %q does not parse", ErrBadPEM, b.Type)
		}
		switch k := k.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("%w: CA key of type %T is not a signing key", ErrBadPEM, k)
	}
}
