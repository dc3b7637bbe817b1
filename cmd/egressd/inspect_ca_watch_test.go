package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
)

// TestWatchInspectCANotYetValid: a renewed CA whose validity begins after
// this clock's now (cert-manager's NotBefore ahead of egressd's clock) is
// refused, counted once, and loaded at a later poll once it is valid,
// although its files did not change again.
func TestWatchInspectCANotYetValid(t *testing.T) {
	dir := t.TempDir()
	o := &runOptions{inspectCACert: filepath.Join(dir, "tls.crt"), inspectCAKey: filepath.Join(dir, "tls.key")}
	write := func(p *testutil.PEMCA) {
		t.Helper()
		for f, b := range map[string][]byte{o.inspectCACert: p.CertPEM, o.inspectCAKey: p.KeyPEM} {
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	pem := func(name string, notBefore time.Time) *testutil.PEMCA {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return testutil.NewPEMCA(t, name, key, func(c *x509.Certificate) { c.NotBefore = notBefore })
	}
	t0 := time.Now()
	old := pem("old CA", t0.Add(-time.Hour))
	write(old)
	ca, err := certs.LoadCA(old.CertPEM, old.KeyPEM, t0)
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := inspect.NewLeaves(ca, inspect.LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	issuer := func() string {
		t.Helper()
		c, err := leaves.Get("api.test")
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Issuer.CommonName
	}
	m := metrics.New()
	clock := t0
	w := watchInspectCA(o, leaves, m, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return clock })
	w.Poll() // the baseline
	write(pem("renewed CA", t0.Add(time.Minute)))
	for i := range 3 {
		w.Poll()
		if got := issuer(); got != "old CA" {
			t.Fatalf("poll %d before the renewed CA is valid: leaf issued by %q", i, got)
		}
	}
	if n := counterValue(t, m.ReloadErrors.WithLabelValues("inspect-ca")); n != 1 {
		t.Fatalf("reload errors %v; want 1 (a pair not yet valid is counted once)", n)
	}
	clock = t0.Add(2 * time.Minute)
	w.Poll()
	if got := issuer(); got != "renewed CA" {
		t.Fatalf("once valid: leaf issued by %q; want the renewed CA", got)
	}
	if n := counterValue(t, m.Reloads.WithLabelValues("inspect-ca")); n != 2 {
		t.Fatalf("reloads %v; want 2 (the baseline and the renewal)", n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
