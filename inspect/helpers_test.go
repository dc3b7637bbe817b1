package inspect

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/testutil"
)

// testCA is a CA made for one test: its certificate, its key and both as
// PEM.
type testCA struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// newTestCA makes a CA; edit changes its template before signing.
func newTestCA(t testing.TB, name string, edit func(*x509.Certificate)) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewPEMCA(t, name, key, edit)
	return &testCA{cert: p.Cert, key: key, certPEM: p.CertPEM, keyPEM: p.KeyPEM}
}

// issue signs a server certificate for names (DNS names or IPs) with ca;
// edit changes the template.
func (ca *testCA) issue(t testing.TB, edit func(*x509.Certificate), names ...string) ([][]byte, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0], Organization: []string{"Origin Test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{der}, key
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func (ca *testCA) load(t testing.TB) *certs.CA {
	t.Helper()
	c, err := certs.LoadCA(ca.certPEM, ca.keyPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
