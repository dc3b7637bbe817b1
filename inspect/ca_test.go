package inspect

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadCA(t *testing.T) {
	good := newTestCA(t, "egressd inspection CA", nil)
	other := newTestCA(t, "other", nil)
	notCA := newTestCA(t, "leafish", func(c *x509.Certificate) { c.IsCA = false })
	noSign := newTestCA(t, "no-sign", func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature })
	expired := newTestCA(t, "old", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	future := newTestCA(t, "future", func(c *x509.Certificate) { c.NotBefore = time.Now().Add(time.Hour) })
	ecKey, _ := x509.MarshalECPrivateKey(good.key)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaCA := newTestCA(t, "rsa", nil)
	tests := []struct {
		name            string
		certPEM, keyPEM []byte
		want            error
		why             string
	}{
		{"pkcs8", good.certPEM, good.keyPEM, nil, ""},
		{"sec1", good.certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecKey}), nil, ""},
		{"key first in a bundle", append(good.certPEM, other.certPEM...), append([]byte("junk\n"), good.keyPEM...), nil, ""},
		{"key mismatch", good.certPEM, other.keyPEM, ErrCAKeyMismatch, "does not match"},
		{"rsa key mismatch", rsaCA.certPEM, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), ErrCAKeyMismatch, "does not match"},
		{"not a CA", notCA.certPEM, notCA.keyPEM, ErrNotCA, "CA:TRUE"},
		{"no keyCertSign", noSign.certPEM, noSign.keyPEM, ErrNotCA, "keyCertSign"},
		{"expired", expired.certPEM, expired.keyPEM, ErrCAExpired, "valid from"},
		{"not yet valid", future.certPEM, future.keyPEM, ErrCAExpired, "valid from"},
		{"no certificate", good.keyPEM, good.keyPEM, ErrBadPEM, "no CERTIFICATE"},
		{"no key", good.certPEM, good.certPEM, ErrBadPEM, "no PRIVATE KEY"},
		{"garbage key", good.certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("nope")}), ErrBadPEM, "does not parse"},
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
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("LoadCA = %v; want %v saying %q", err, tt.want, tt.why)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY-----") || strings.Contains(err.Error(), string(tt.keyPEM[30:60])) {
				t.Fatalf("the error holds key material: %v", err)
			}
		})
	}
}

func TestLoadCAFiles(t *testing.T) {
	ca := newTestCA(t, "files", nil)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, ca.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, ca.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCAFiles(certFile, keyFile, time.Now()); err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(other)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCAFiles(certFile, keyFile, time.Now()); !errors.Is(err, ErrCAKeyMismatch) || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("LoadCAFiles = %v; want ErrCAKeyMismatch naming the file", err)
	}
	if _, err := LoadCAFiles(filepath.Join(dir, "none"), keyFile, time.Now()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadCAFiles(missing) = %v", err)
	}
}
