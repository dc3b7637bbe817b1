package certs

import (
	"strings"
	"testing"
	"time"
)

// FuzzLoadCA: LoadCA takes whatever a file or a Secret holds without
// panicking, and its error never quotes the key input (a key that almost
// parses must not reach a log line).
func FuzzLoadCA(f *testing.F) {
	for _, kind := range []string{"ecdsa", "rsa", "ed25519"} {
		p := newPEMCA(f, "seed "+kind, mustKey(f, kind), nil)
		f.Add(p.CertPEM, p.KeyPEM)
	}
	good := newPEMCA(f, "seed", nil, nil)
	f.Add(good.CertPEM, []byte("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"))
	f.Add(good.CertPEM, []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), good.KeyPEM)
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		ca, err := LoadCA(certPEM, keyPEM, time.Now())
		if err == nil {
			if ca.Certificate() == nil {
				t.Fatal("a CA without its certificate")
			}
			return
		}
		for _, line := range strings.Split(string(keyPEM), "\n") {
			if line = strings.TrimSpace(line); len(line) >= 12 && !strings.HasPrefix(line, "-----") && strings.Contains(err.Error(), line) {
				t.Fatalf("the error %q quotes the key input %q", err, line)
			}
		}
	})
}
