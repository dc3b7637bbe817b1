package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Defaults of NewCA and Issue: long enough for any test run or demo.
// Certificates are backdated an hour so that clock skew between processes
// does not matter.
const (
	validity = 10 * 24 * time.Hour
	backdate = time.Hour
)

// CA is a self-signed root that issues leaf certificates. It is safe for
// concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
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
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
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
	return newCA(cert, key)
}

func newCA(cert *x509.Certificate, key *ecdsa.PrivateKey) (*CA, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal CA key: %w", err)
	}
	return &CA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// LoadCA rebuilds a CA from the PEM that CertPEM and KeyPEM returned (a CA
// kept in a Secret). The key must be ECDSA and match the certificate, and
// the certificate must be a CA.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil || cb.Type != "CERTIFICATE" || kb.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: want a CERTIFICATE and a PKCS #8 PRIVATE KEY block", ErrBadCA)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCA, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCA, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: not an ECDSA CA whose key matches its certificate", ErrBadCA)
	}
	return newCA(cert, key)
}

// CertPEM returns the root certificate in PEM (for curl --cacert).
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// KeyPEM returns the root's private key in PKCS #8 PEM.
func (ca *CA) KeyPEM() []byte { return append([]byte(nil), ca.keyPEM...) }

// Certificate returns the parsed root certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPool returns a pool holding only the root, for tls.Config.RootCAs.
func (ca *CA) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// LeafConfig configures IssueWith.
type LeafConfig struct {
	// Hosts are DNS names and IP addresses; the first is also the
	// subject's common name. Required.
	Hosts []string
	// Validity; zero means 10 days. It is cut to the CA's NotAfter.
	Validity time.Duration
	// Now is the issuing time; zero means time.Now().
	Now time.Time
	// ServerOnly leaves out the client-auth key usage (a serving
	// certificate); false makes a certificate for both ends, as tests use.
	ServerOnly bool
}

// Issue returns a server and client leaf certificate (ECDSA P-256) for the
// given host names and IP addresses, chained to the root, valid for 10
// days. The first host is also the subject's common name.
func (ca *CA) Issue(hosts ...string) (tls.Certificate, error) {
	return ca.IssueWith(LeafConfig{Hosts: hosts})
}

// IssueWith returns a leaf certificate (ECDSA P-256) as cfg says, its chain
// the leaf and the root.
func (ca *CA) IssueWith(cfg LeafConfig) (tls.Certificate, error) {
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		return tls.Certificate{}, ErrNoHosts
	}
	now, life := times(cfg.Now, cfg.Validity)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: generate key for %q: %w", hosts[0], err)
	}
	notAfter := now.Add(life)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter // a leaf outliving its root would fail verification early anyway
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if cfg.ServerOnly {
		usage = usage[:1]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: issue for %q: %w", hosts[0], err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: parse leaf for %q: %w", hosts[0], err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// EncodePair returns c's chain and its ECDSA key in PEM (tls.crt, tls.key).
func EncodePair(c tls.Certificate) (certPEM, keyPEM []byte, err error) {
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || len(c.Certificate) == 0 {
		return nil, nil, fmt.Errorf("%w: want a chain and an ECDSA key", ErrBadCA)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: marshal key: %w", err)
	}
	for _, b := range c.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b})...)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
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

// serial returns a random 127-bit serial number (RFC 5280 §4.1.2.2: positive,
// at most 20 octets).
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand never fails on Linux
	return n
}

// IssuePair is IssueWith followed by EncodePair: the PEM of a new leaf's
// chain and key, as a kubernetes.io/tls Secret holds them.
func (ca *CA) IssuePair(cfg LeafConfig) (certPEM, keyPEM []byte, err error) {
	c, err := ca.IssueWith(cfg)
	if err != nil {
		return nil, nil, err
	}
	return EncodePair(c)
}
