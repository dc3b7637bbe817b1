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
	"io"
	"math/big"
	"net"
	"strings"
	"time"
)

// LeafConfig configures IssueWith.
type LeafConfig struct {
	// Hosts are DNS names and IP addresses, each a SAN; the first is also
	// the subject's common name. Required.
	Hosts []string
	// Validity from Now; zero means 10 days. It is cut to the CA's
	// NotAfter.
	Validity time.Duration
	// Backdate sets NotBefore this far before Now, for peers whose clocks
	// run behind; zero means 1h.
	Backdate time.Duration
	// Now is the issuing time; zero means time.Now().
	Now time.Time
	// Rand is the entropy for the key, the serial and the signature; nil
	// means crypto/rand.
	Rand io.Reader
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

// IssueWith returns a leaf certificate as cfg says: a fresh ECDSA P-256
// key, CA:FALSE, digitalSignature, serverAuth (and clientAuth unless
// ServerOnly), signed by the CA's key of whatever type; its chain is the
// leaf, the CA and the intermediates loaded after it (LoadCA), and Leaf is
// set.
func (ca *CA) IssueWith(cfg LeafConfig) (tls.Certificate, error) {
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		return tls.Certificate{}, ErrNoHosts
	}
	now, life := times(cfg.Now, cfg.Validity)
	back := cfg.Backdate
	if back == 0 {
		back = backdate
	}
	random := cfg.Rand
	if random == nil {
		random = rand.Reader
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: generate key for %q: %w", hosts[0], err)
	}
	sn, err := serial(random)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w for %q", err, hosts[0])
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
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: hosts[0]},
		NotBefore:             now.Add(-back),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
	}
	tmpl.DNSNames, tmpl.IPAddresses = sans(hosts)
	der, err := x509.CreateCertificate(random, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: issue for %q: %w", hosts[0], err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: parse leaf for %q: %w", hosts[0], err)
	}
	return tls.Certificate{Certificate: append([][]byte{der}, ca.chain...), PrivateKey: key, Leaf: leaf}, nil
}

// sans splits hosts into DNS names and IP addresses. A list without IPs
// (every inspected leaf) is its own DNS list: the minting path copies
// nothing and parses no name as an address.
func sans(hosts []string) ([]string, []net.IP) {
	var ips []net.IP
	for _, h := range hosts {
		if ip := parseIP(h); ip != nil {
			ips = append(ips, ip)
		}
	}
	if ips == nil {
		return hosts, nil
	}
	dns := make([]string, 0, len(hosts)-len(ips))
	for _, h := range hosts {
		if parseIP(h) == nil {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// parseIP is net.ParseIP without its cost for a host name: a name that
// holds no colon and ends in a letter is no address (an IPv4 literal ends
// in a digit, an IPv6 one holds a colon), and a failed parse allocates its
// error.
func parseIP(h string) net.IP {
	if last := len(h) - 1; last < 0 || (!strings.Contains(h, ":") && (h[last] < '0' || h[last] > '9')) {
		return nil
	}
	return net.ParseIP(h)
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

// IssuePair is IssueWith followed by EncodePair: the PEM of a new leaf's
// chain and key, as a kubernetes.io/tls Secret holds them.
func (ca *CA) IssuePair(cfg LeafConfig) (certPEM, keyPEM []byte, err error) {
	c, err := ca.IssueWith(cfg)
	if err != nil {
		return nil, nil, err
	}
	return EncodePair(c)
}

// serial returns a random 127-bit serial number (RFC 5280 §4.1.2.2:
// positive, at most 20 octets).
func serial(random io.Reader) (*big.Int, error) {
	n, err := rand.Int(random, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return n, nil
}
