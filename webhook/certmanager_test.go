package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// memSecret is a SecretStore in memory with resourceVersions; beforeWrite
// runs before each Create or Update (another replica's write in between).
type memSecret struct {
	mu          sync.Mutex
	data        map[string][]byte
	version     int
	beforeWrite func()
	writes      int
}

func (s *memSecret) Get(context.Context) (map[string][]byte, string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil, "", false, nil
	}
	return maps.Clone(s.data), strconv.Itoa(s.version), true, nil
}

func (s *memSecret) hook() {
	if f := s.beforeWrite; f != nil {
		s.beforeWrite = nil
		f()
	}
}

func (s *memSecret) Create(_ context.Context, data map[string][]byte) (bool, error) {
	s.hook()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data != nil {
		return false, nil
	}
	s.data, s.version, s.writes = maps.Clone(data), s.version+1, s.writes+1
	return true, nil
}

func (s *memSecret) Update(_ context.Context, data map[string][]byte, version string) (bool, error) {
	s.hook()
	s.mu.Lock()
	defer s.mu.Unlock()
	if strconv.Itoa(s.version) != version {
		return false, nil
	}
	s.data, s.version, s.writes = maps.Clone(data), s.version+1, s.writes+1
	return true, nil
}

type memPatcher struct{ bundle []byte }

func (p *memPatcher) PatchCABundle(_ context.Context, b []byte) error { p.bundle = b; return nil }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newManager(t *testing.T, store SecretStore, clk *clock) (*CertManager, *memPatcher, string) {
	t.Helper()
	dir := t.TempDir()
	p := &memPatcher{}
	m, err := NewCertManager(CertManagerConfig{
		Service: "egressd", Namespace: "llm-prod", CertDir: dir, Secrets: store, Webhook: p,
		CAValidity: 365 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour, RenewBefore: 10 * 24 * time.Hour, Now: clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, p, dir
}

// served is the pair in dir, verified against bundle for the Service name
// at now.
func served(t *testing.T, dir string, bundle []byte, now time.Time) *x509.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatalf("bundle %q holds no certificate", bundle)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "egressd.llm-prod.svc", CurrentTime: now}); err != nil {
		t.Fatalf("served certificate does not verify against the caBundle: %v", err)
	}
	return c.Leaf
}

func roots(t *testing.T, bundle []byte) int {
	n := 0
	for b, rest := pem.Decode(bundle); b != nil; b, rest = pem.Decode(rest) {
		n++
	}
	return n
}

// TestCertRenewal walks the clock through a serving certificate's and a
// root's life: issued at the start, kept while good, renewed from the same
// root before it expires, and a new root (bundled with the old one) when
// the root itself runs short.
func TestCertRenewal(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	store := &memSecret{}
	m, p, dir := newManager(t, store, clk)
	ctx := context.Background()
	steps := []struct {
		name       string
		advance    time.Duration
		wantWrites int
		wantNew    bool // a new serving certificate
		wantRoots  int
	}{
		{"issued at start", 0, 1, true, 1},
		{"kept while good", 19 * 24 * time.Hour, 1, false, 1},
		{"renewed before expiry", 2 * 24 * time.Hour, 2, true, 1},
		{"kept after renewal", 24 * time.Hour, 2, false, 1},
		{"new root when the root runs short", 320 * 24 * time.Hour, 3, true, 2},
		{"old root leaves the bundle once expired", 30 * 24 * time.Hour, 4, true, 1},
	}
	var last *x509.Certificate
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.t = clk.t.Add(s.advance)
			if err := m.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if store.writes != s.wantWrites {
				t.Errorf("secret writes %d, want %d", store.writes, s.wantWrites)
			}
			leaf := served(t, dir, p.bundle, clk.t)
			if isNew := last == nil || leaf.SerialNumber.Cmp(last.SerialNumber) != 0; isNew != s.wantNew {
				t.Errorf("new serving certificate %v, want %v", isNew, s.wantNew)
			}
			if got := roots(t, p.bundle); got != s.wantRoots {
				t.Errorf("caBundle holds %d roots, want %d", got, s.wantRoots)
			}
			if leaf.NotAfter.Sub(clk.t) < 10*24*time.Hour {
				t.Errorf("serving certificate expires %v, within RenewBefore of %v", leaf.NotAfter, clk.t)
			}
			last = leaf
		})
	}
}

// TestCertReplicas: two replicas start at once; the one that loses the
// race to create the Secret adopts the winner's certificate, and so does
// one that loses a renewal race.
func TestCertReplicas(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	store := &memSecret{}
	a, pa, dirA := newManager(t, store, clk)
	b, pb, dirB := newManager(t, store, clk)
	ctx := context.Background()
	store.beforeWrite = func() { // b's Create comes second: a writes between b's Get and Create
		if err := a.Sync(ctx); err != nil {
			t.Error(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	la, lb := served(t, dirA, pa.bundle, clk.t), served(t, dirB, pb.bundle, clk.t)
	if store.writes != 1 || la.SerialNumber.Cmp(lb.SerialNumber) != 0 {
		t.Fatalf("writes %d, serials %s and %s: the loser did not adopt", store.writes, la.SerialNumber, lb.SerialNumber)
	}
	clk.t = clk.t.Add(25 * 24 * time.Hour) // both due for renewal
	store.beforeWrite = func() {
		if err := a.Sync(ctx); err != nil {
			t.Error(err)
		}
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	la, lb = served(t, dirA, pa.bundle, clk.t), served(t, dirB, pb.bundle, clk.t)
	if store.writes != 2 || la.SerialNumber.Cmp(lb.SerialNumber) != 0 {
		t.Fatalf("renewal race: writes %d, serials %s and %s", store.writes, la.SerialNumber, lb.SerialNumber)
	}
}

// TestCertManagerServes: the Server reads what the manager wrote.
func TestCertManagerServes(t *testing.T) {
	clk := &clock{t: time.Now()}
	m, _, dir := newManager(t, &memSecret{}, clk)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Namespace: "llm-prod", CertDir: dir, Inject: testInject()}); err != nil {
		t.Fatalf("server on the manager's pair: %v", err)
	}
}

func TestNewCertManagerConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  CertManagerConfig
	}{
		{"nothing", CertManagerConfig{}},
		{"renew after expiry", CertManagerConfig{Service: "s", Namespace: "n", CertDir: "d", Secrets: &memSecret{}, Webhook: &memPatcher{},
			CertValidity: time.Hour, RenewBefore: 2 * time.Hour}},
		{"leaf outlives root", CertManagerConfig{Service: "s", Namespace: "n", CertDir: "d", Secrets: &memSecret{}, Webhook: &memPatcher{},
			CertValidity: 48 * time.Hour, CAValidity: 24 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewCertManager(tc.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
