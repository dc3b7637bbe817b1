package certs

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

// TestServingCertificate: the webhook's pair as IssueWith makes it — its
// lifetime from the given clock, cut to the root's, server auth only, the
// Service's names — verifies against a root rebuilt from its PEM.
func TestServingCertificate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCAWith(CAConfig{CommonName: "egressd webhook CA", Validity: 365 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(ca.CertPEM(), ca.KeyPEM(), now)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"egressd.llm-prod.svc", "egressd.llm-prod.svc.cluster.local"}
	for _, tc := range []struct {
		name     string
		validity time.Duration
		want     time.Time
	}{
		{"inside the root's life", 90 * 24 * time.Hour, now.Add(90 * 24 * time.Hour)},
		{"cut to the root's end", 2 * 365 * 24 * time.Hour, ca.Certificate().NotAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loaded.IssueWith(LeafConfig{Hosts: names, Validity: tc.validity, Now: now, ServerOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if !c.Leaf.NotAfter.Equal(tc.want) || !c.Leaf.NotBefore.Equal(now.Add(-backdate)) {
				t.Errorf("valid %v to %v, want until %v", c.Leaf.NotBefore, c.Leaf.NotAfter, tc.want)
			}
			if !slices.Equal(c.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || !slices.Equal(c.Leaf.DNSNames, names) {
				t.Errorf("usage %v names %v", c.Leaf.ExtKeyUsage, c.Leaf.DNSNames)
			}
			if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), DNSName: names[1], CurrentTime: now.Add(time.Hour)}); err != nil {
				t.Errorf("verify: %v", err)
			}
		})
	}
}
