package certs

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

// LoadCAFiles reads a PEM CA certificate and its PEM key from files
// (--inspect-ca-cert, --inspect-ca-key) and checks them as LoadCA does;
// errors name both files.
func LoadCAFiles(certFile, keyFile string, now time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM, now)
	if err != nil {
		return nil, fmt.Errorf("%w (certificate %s, key %s)", err, certFile, keyFile)
	}
	return ca, nil
}

// LoadCA parses a PEM CA certificate (the first CERTIFICATE block; the
// blocks after it are its chain up to a root, as cert-manager writes
// tls.crt for an intermediate CA, sent after every leaf) and its PEM
// private key (the first PKCS #8, SEC 1
// EC or PKCS #1 RSA block; ECDSA, RSA or Ed25519) and refuses, with an
// error a person can act on: a key that is not the certificate's
// (ErrCAKeyMismatch), a certificate without the CA:TRUE basic constraint
// or, when it has a key usage at all, without keyCertSign (ErrNotCA; RFC
// 5280 §4.2.1.3: no key usage extension means no restriction), one not
// valid at now (ErrCAExpired; ErrCANotYetValid before its NotBefore) and
// PEM without such blocks (ErrBadPEM).
// Every refusal also matches ErrBadCA. Errors name the subject and the
// block type, never key material.
func LoadCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	blocks := certificates(certPEM)
	if len(blocks) == 0 {
		return nil, refuse(ErrBadPEM, "no CERTIFICATE block in the CA certificate")
	}
	cert, err := x509.ParseCertificate(blocks[0])
	if err != nil {
		return nil, refuse(ErrBadPEM, "the CA certificate does not parse: "+err.Error())
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	switch {
	case !ok || !pub.Equal(cert.PublicKey):
		return nil, refuse(ErrCAKeyMismatch, cert.Subject.String())
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return nil, refuse(ErrNotCA, cert.Subject.String()+" has no CA:TRUE basic constraint")
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, refuse(ErrNotCA, cert.Subject.String()+" lacks the keyCertSign key usage")
	case now.Before(cert.NotBefore):
		return nil, refuse(ErrCANotYetValid, fmt.Sprintf("%s is valid from %s to %s", cert.Subject,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339)))
	case now.After(cert.NotAfter):
		return nil, refuse(ErrCAExpired, fmt.Sprintf("%s is valid from %s to %s", cert.Subject,
			cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339)))
	}
	ca := newCA(cert, key)
	for _, der := range blocks[1:] {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, refuse(ErrBadPEM, "a certificate after the CA's does not parse: "+err.Error())
		}
		ca.chain = append(ca.chain, der)
	}
	return ca, nil
}

// refuse is LoadCA's error: the reason's sentinel (which matches
// ErrBadCA too) and what a person needs to fix it.
func refuse(reason error, detail string) error {
	return fmt.Errorf("%w: %s", reason, detail)
}

// certificates returns the DER of every CERTIFICATE block of data, in
// order.
func certificates(data []byte) [][]byte {
	var ders [][]byte
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return ders
		}
		if b.Type == "CERTIFICATE" {
			ders = append(ders, b.Bytes)
		}
	}
}

// parseKey parses the first private key block of keyPEM. Errors name the
// block type, never its bytes.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, refuse(ErrBadPEM, "no PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block in the CA key")
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
			// Not err itself: a parser's message may quote the input.
			return nil, refuse(ErrBadPEM, fmt.Sprintf("CA key block %q does not parse", b.Type))
		}
		switch k := k.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		}
		return nil, refuse(ErrBadPEM, fmt.Sprintf("CA key of type %T cannot sign certificates", k))
	}
}
