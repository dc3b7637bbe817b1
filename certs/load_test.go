package certs

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
)

func TestLoadCA(t *testing.T) {
	good := newPEMCA(t, "egressd inspection CA", nil, nil)
	other := newPEMCA(t, "other", nil, nil)
	notCA := newPEMCA(t, "leafish", nil, func(c *x509.Certificate) { c.IsCA = false })
	noConstraints := newPEMCA(t, "v1ish", nil, func(c *x509.Certificate) { c.IsCA, c.BasicConstraintsValid = false, false })
	noSign := newPEMCA(t, "no-sign", nil, func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature })
	noUsage := newPEMCA(t, "no-usage", nil, func(c *x509.Certificate) { c.KeyUsage = 0 })
	expired := newPEMCA(t, "old", nil, func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	future := newPEMCA(t, "future", nil, func(c *x509.Certificate) { c.NotBefore = time.Now().Add(time.Hour) })
	ecKey := mustKey(t, "ecdsa").(*ecdsa.PrivateKey)
	sec1, _ := x509.MarshalECPrivateKey(ecKey)
	ecCA := newPEMCA(t, "sec1", ecKey, nil)
	rsaKey := mustKey(t, "rsa").(*rsa.PrivateKey)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	rsaCA := newPEMCA(t, "rsa", rsaKey, nil)
	edCA := newPEMCA(t, "ed25519", mustKey(t, "ed25519"), nil)
	p384CA := newPEMCA(t, "p384", mustKey(t, "ecdsa-p384"), nil)
	leafCert, leafKey, err := mustLoad(t, good).IssuePair(LeafConfig{Hosts: []string{"x.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		certPEM, keyPEM []byte
		want            error
		why             string
	}{
		{"pkcs8", good.CertPEM, good.KeyPEM, nil, ""},
		{"sec1", ecCA.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), nil, ""},
		{"rsa pkcs1", rsaCA.CertPEM, pkcs1, nil, ""},
		{"rsa pkcs8", rsaCA.CertPEM, rsaCA.KeyPEM, nil, ""},
		{"ed25519", edCA.CertPEM, edCA.KeyPEM, nil, ""},
		{"ecdsa p-384", p384CA.CertPEM, p384CA.KeyPEM, nil, ""},
		{"no key usage at all", noUsage.CertPEM, noUsage.KeyPEM, nil, ""},
		{"key first in a bundle", append(good.CertPEM, other.CertPEM...), append([]byte("junk\n"), good.KeyPEM...), nil, ""},
		{"empty", nil, nil, ErrBadPEM, "no CERTIFICATE"},
		{"key of another CA", good.CertPEM, other.KeyPEM, ErrCAKeyMismatch, "does not match"},
		{"ecdsa key for an rsa CA", rsaCA.CertPEM, good.KeyPEM, ErrCAKeyMismatch, "does not match"},
		{"not a CA", notCA.CertPEM, notCA.KeyPEM, ErrNotCA, "CA:TRUE"},
		{"no basic constraints", noConstraints.CertPEM, noConstraints.KeyPEM, ErrNotCA, "CA:TRUE"},
		{"a leaf is no CA", leafCert, leafKey, ErrNotCA, "CA:TRUE"},
		{"no keyCertSign", noSign.CertPEM, noSign.KeyPEM, ErrNotCA, "keyCertSign"},
		{"expired", expired.CertPEM, expired.KeyPEM, ErrCAExpired, "valid from"},
		{"not yet valid", future.CertPEM, future.KeyPEM, ErrCAExpired, "valid from"},
		{"not yet valid, its own reason", future.CertPEM, future.KeyPEM, ErrCANotYetValid, "not valid yet"},
		{"no certificate", good.KeyPEM, good.KeyPEM, ErrBadPEM, "no CERTIFICATE"},
		{"junk certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), good.KeyPEM, ErrBadPEM, "does not parse"},
		{"no key", good.CertPEM, good.CertPEM, ErrBadPEM, "no PRIVATE KEY"},
		{"garbage key", good.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("nope")}), ErrBadPEM, "does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, err := LoadCA(tt.certPEM, tt.keyPEM, time.Now())
			if tt.want == nil {
				if err != nil || ca.Certificate() == nil {
					t.Fatalf("LoadCA: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrBadCA) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("LoadCA = %v; want %v (and ErrBadCA) saying %q", err, tt.want, tt.why)
			}
			if body := keyBody(tt.keyPEM); strings.Contains(err.Error(), "PRIVATE KEY-----") || (body != "" && strings.Contains(err.Error(), body)) {
				t.Fatalf("the error holds key material: %v", err)
			}
		})
	}
}

func TestLoadCAFiles(t *testing.T) {
	ca := newPEMCA(t, "files", nil, nil)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	writeFile(t, certFile, ca.CertPEM)
	writeFile(t, keyFile, ca.KeyPEM)
	if _, err := LoadCAFiles(certFile, keyFile, time.Now()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, keyFile, newPEMCA(t, "other", nil, nil).KeyPEM)
	if _, err := LoadCAFiles(certFile, keyFile, time.Now()); !errors.Is(err, ErrCAKeyMismatch) || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("LoadCAFiles = %v; want ErrCAKeyMismatch naming the file", err)
	}
	if _, err := LoadCAFiles(filepath.Join(dir, "none"), keyFile, time.Now()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadCAFiles(missing) = %v", err)
	}
}

// TestCANeverPrintsItsKey: a CA passed to fmt (a log line, an error)
// shows its subject, not its key, whatever the key type and the verb.
func TestCANeverPrintsItsKey(t *testing.T) {
	for _, kind := range []string{"ecdsa", "rsa", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			p := newPEMCA(t, "printed "+kind, mustKey(t, kind), nil)
			ca := mustLoad(t, p)
			der, _ := pem.Decode(p.KeyPEM)
			for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
				for _, arg := range []any{ca, *ca} {
					out := fmt.Sprintf(verb, arg)
					if !strings.Contains(out, "printed "+kind) || strings.Contains(out, fmt.Sprintf("%x", der.Bytes[len(der.Bytes)-16:])) ||
						strings.Contains(out, fmt.Sprint(der.Bytes[len(der.Bytes)-8:])) {
						t.Fatalf("%s of %T = %q", verb, arg, out)
					}
				}
			}
		})
	}
}

func mustLoad(t testing.TB, p *testutil.PEMCA) *CA {
	t.Helper()
	ca, err := LoadCA(p.CertPEM, p.KeyPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// keyBody is a line from the middle of a PEM key, or "".
func keyBody(keyPEM []byte) string {
	lines := strings.Split(string(keyPEM), "\n")
	if len(lines) < 3 {
		return ""
	}
	return lines[1]
}

func writeFile(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
