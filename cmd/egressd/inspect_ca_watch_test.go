package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	pemlib "encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
	issuer := func() string { t.Helper(); return leafIssuer(t, leaves) }
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

// TestWatchInspectCASwaps: the ways a mounted Secret changes under the
// watcher. Kubernetes swaps a ..data symlink to a new directory (the
// files are links through it): the new pair loads. A key of another type
// beside the certificate and a certificate cut short (a write caught
// half-way) are refused, the CA in force stays, and the completed write
// loads. No log line holds key material.
func TestWatchInspectCASwaps(t *testing.T) {
	dir := t.TempDir()
	// The Secret volume's layout: tls.crt -> ..data/tls.crt, ..data -> ..v1.
	for _, v := range []string{"..v1", "..v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	o := &runOptions{inspectCACert: filepath.Join(dir, "tls.crt"), inspectCAKey: filepath.Join(dir, "tls.key")}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	newPEM := func(name string) (*testutil.PEMCA, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return testutil.NewPEMCA(t, name, key, nil), key
	}
	writeIn := func(v string, certPEM, keyPEM []byte) {
		t.Helper()
		for f, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
			if err := os.WriteFile(filepath.Join(dir, v, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, _ := newPEM("first CA")
	writeIn("..v1", first.CertPEM, first.KeyPEM)
	ca, err := certs.LoadCAFiles(o.inspectCACert, o.inspectCAKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := inspect.NewLeaves(ca, inspect.LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	m := metrics.New()
	w := watchInspectCA(o, leaves, m, slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
	w.Poll()
	issuer := func() string { t.Helper(); return leafIssuer(t, leaves) }
	var keys [][]byte
	step := func(name, want string, change func()) {
		t.Helper()
		change()
		w.Poll()
		if got := issuer(); got != want {
			t.Fatalf("%s: leaf issued by %q; want %q", name, got, want)
		}
	}

	second, secondKey := newPEM("second CA")
	keys = append(keys, first.KeyPEM, second.KeyPEM)
	step("..data swapped to a new pair", "second CA", func() {
		writeIn("..v2", second.CertPEM, second.KeyPEM)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink("..v2", tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	})
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pemlib.EncodeToMemory(&pemlib.Block{Type: "PRIVATE KEY", Bytes: der})
	keys = append(keys, rsaPEM)
	step("a key of another type", "second CA", func() { writeIn("..v2", second.CertPEM, rsaPEM) })
	third, _ := newPEM("third CA")
	keys = append(keys, third.KeyPEM)
	step("a certificate cut short", "second CA", func() { writeIn("..v2", third.CertPEM[:len(third.CertPEM)/2], third.KeyPEM) })
	step("the write completed", "third CA", func() { writeIn("..v2", third.CertPEM, third.KeyPEM) })

	if n := counterValue(t, m.ReloadErrors.WithLabelValues("inspect-ca")); n != 2 {
		t.Errorf("reload errors %v; want 2", n)
	}
	secrets := []string{"PRIVATE KEY", fmt.Sprintf("%x", secondKey.D.Bytes())}
	for _, k := range keys {
		secrets = append(secrets, string(k[40:80]))
	}
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("a log line holds key material %q:\n%s", s, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "reload rejected") {
		t.Errorf("no rejection logged:\n%s", logs.String())
	}
}

// leafIssuer is the common name of the issuer of the leaf leaves give
// now.
func leafIssuer(t *testing.T, leaves *inspect.Leaves) string {
	t.Helper()
	c, err := leaves.Get("api.test")
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.Issuer.CommonName
}
