package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
	"time"
)

// TestIssueWithAnySigner: a CA loaded with an ECDSA, RSA or Ed25519 key
// issues leaves that verify against it, with the clock, backdate and
// lifetime given, an ECDSA P-256 key, CA:FALSE and exactly the names
// given.
func TestIssueWithAnySigner(t *testing.T) {
	now := time.Now().Truncate(time.Second) // certificates hold whole seconds
	for _, kind := range []string{"ecdsa", "ecdsa-p384", "rsa", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			ca := mustLoad(t, newPEMCA(t, "ca "+kind, mustKey(t, kind), nil))
			c, err := ca.IssueWith(LeafConfig{Hosts: []string{"api.llm.example"}, Validity: 24 * time.Hour,
				Backdate: 5 * time.Minute, Now: now, ServerOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			leaf := c.Leaf
			if !slices.Equal(leaf.DNSNames, []string{"api.llm.example"}) || len(leaf.IPAddresses) != 0 || leaf.Subject.CommonName != "api.llm.example" {
				t.Errorf("names %v %v %q", leaf.DNSNames, leaf.IPAddresses, leaf.Subject.CommonName)
			}
			if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
				t.Errorf("leaf key %T; want ECDSA P-256", leaf.PublicKey)
			}
			if !leaf.NotBefore.Equal(now.Add(-5*time.Minute)) || !leaf.NotAfter.Equal(now.Add(24*time.Hour)) {
				t.Errorf("valid %s – %s", leaf.NotBefore, leaf.NotAfter)
			}
			if leaf.IsCA || !leaf.BasicConstraintsValid || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("IsCA %v (constraints %v), usage %v", leaf.IsCA, leaf.BasicConstraintsValid, leaf.ExtKeyUsage)
			}
			if len(c.Certificate) != 2 || !bytes.Equal(c.Certificate[1], ca.Certificate().Raw) {
				t.Errorf("chain of %d, not the leaf and the CA", len(c.Certificate))
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "api.llm.example", Roots: ca.CertPool(), CurrentTime: now}); err != nil {
				t.Errorf("the leaf does not verify against its CA: %v", err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.llm.example", Roots: ca.CertPool(), CurrentTime: now}); err == nil {
				t.Error("the leaf verifies for another name")
			}
		})
	}
}

// TestIssueRand: the serial comes from Rand, and a Rand that fails fails
// the issue instead of falling back to another source.
func TestIssueRand(t *testing.T) {
	ca := mustLoad(t, newPEMCA(t, "rand", nil, nil))
	fixed := func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte{0x5a}, 4096)) }
	a, err := ca.IssueWith(LeafConfig{Hosts: []string{"a.example"}, Rand: fixed()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.IssueWith(LeafConfig{Hosts: []string{"b.example"}, Rand: fixed()})
	if err != nil {
		t.Fatal(err)
	}
	if a.Leaf.SerialNumber.Cmp(b.Leaf.SerialNumber) != 0 {
		t.Errorf("serials %v and %v from the same Rand", a.Leaf.SerialNumber, b.Leaf.SerialNumber)
	}
	boom := errors.New("no entropy")
	if _, err := ca.IssueWith(LeafConfig{Hosts: []string{"c.example"}, Rand: iotest.ErrReader(boom)}); !errors.Is(err, boom) {
		t.Errorf("IssueWith with a failing Rand = %v; want %v", err, boom)
	}
}

// TestIssueSANs: names become DNS SANs and addresses IP SANs, in order.
func TestIssueSANs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []string
		dns   []string
		ips   int
	}{
		{"one name", []string{"a.example"}, []string{"a.example"}, 0},
		{"names and addresses", []string{"a.example", "127.0.0.1", "b.example", "::1"}, []string{"a.example", "b.example"}, 2},
		{"addresses only", []string{"127.0.0.1"}, []string{}, 1},
		{"a name ending in a digit", []string{"host1", "10.0.0.1.example", "256.1.1.1"}, []string{"host1", "10.0.0.1.example", "256.1.1.1"}, 0},
		{"an IPv4-mapped IPv6 address", []string{"::ffff:10.0.0.1", "fe80::1"}, []string{}, 2},
		{"empty", []string{""}, []string{""}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns, ips := sans(tc.hosts)
			if !slices.Equal(dns, tc.dns) || len(ips) != tc.ips {
				t.Fatalf("sans(%v) = %v, %v", tc.hosts, dns, ips)
			}
		})
	}
}
