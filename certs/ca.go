package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"time"
)

// Defaults of NewCA and IssueWith: long enough for any test run or demo.
// Certificates are backdated an hour so that clock skew between processes
// does not matter.
const (
	validity = 10 * 24 * time.Hour
	backdate = time.Hour
)

// CA is a CA certificate and the key that signs with it: a root this
// package made (NewCA, NewCAWith) or one loaded from PEM (LoadCA), whose
// key may be ECDSA, RSA or Ed25519. It is safe for concurrent use. It
// prints as its subject only (Format): no verb of fmt shows the key.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	// chain is what follows each leaf IssueWith makes: the CA's DER, then
	// the intermediates that followed it in the loaded PEM (LoadCA), so a
	// client that trusts only the root above an intermediate CA verifies.
	chain [][]byte
}

// CAConfig configures NewCAWith.
type CAConfig struct {
	// CommonName of the root. Required.
	CommonName string
	// Organization of the subject; zero means "egressd".
	Organization string
	// Validity; zero means 10 days.
	Validity time.Duration
	// Now is the issuing time; zero means time.Now().
	Now time.Time
}

// NewCA creates a root certificate with the given common name and a fresh
// ECDSA P-256 key, valid for 10 days (tests, demos, benchmarks).
func NewCA(commonName string) (*CA, error) {
	return NewCAWith(CAConfig{CommonName: commonName, Organization: "egressd test CA"})
}

// NewCAWith creates a root certificate (ECDSA P-256, path length zero: it
// signs leaves only) as cfg says.
func NewCAWith(cfg CAConfig) (*CA, error) {
	if cfg.CommonName == "" {
		return nil, ErrNoHosts
	}
	now, life := times(cfg.Now, cfg.Validity)
	org := cfg.Organization
	if org == "" {
		org = "egressd"
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	sn, err := serial(rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cfg.CommonName, Organization: []string{org}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(life),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA certificate: %w", err)
	}
	return newCA(cert, key), nil
}

func newCA(cert *x509.Certificate, key crypto.Signer) *CA {
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		chain: [][]byte{cert.Raw}}
}

// CertPEM returns the CA certificate in PEM (for curl --cacert).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// KeyPEM returns the CA's private key in PKCS #8 PEM, for a root that must
// be kept (the webhook's Secret, a test's key file); nil if the key cannot
// be marshalled, which no key of NewCAWith or LoadCA is. Serving code
// other than the webhook's certificate manager never calls it.
func (ca *CA) KeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Certificate returns the parsed CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPool returns a pool holding only the CA, for tls.Config.RootCAs.
func (ca *CA) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Format prints the CA as its subject for every verb (%v, %+v, %#v, %s):
// the struct holds the key (an Ed25519 key is a byte slice fmt would
// print), and a CA that reaches a log line must not take it along.
func (ca CA) Format(f fmt.State, _ rune) {
	if ca.cert == nil {
		fmt.Fprint(f, "certs.CA(none)")
		return
	}
	fmt.Fprintf(f, "certs.CA(%s)", ca.cert.Subject)
}

func times(now time.Time, life time.Duration) (time.Time, time.Duration) {
	if now.IsZero() {
		now = time.Now()
	}
	if life == 0 {
		life = validity
	}
	return now, life
}
