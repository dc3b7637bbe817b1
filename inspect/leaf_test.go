package inspect

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestLeafShape(t *testing.T) {
	ca := newTestCA(t, "ca", nil)
	now := time.Now().Truncate(time.Second) // certificates hold whole seconds
	leaves, err := NewLeaves(ca.load(t), LeafConfig{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := leaves.Get("api.llm.example")
	if err != nil {
		t.Fatal(err)
	}
	leaf := c.Leaf
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "api.llm.example" || len(leaf.IPAddresses) != 0 || len(leaf.URIs) != 0 || len(leaf.EmailAddresses) != 0 {
		t.Fatalf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T; want ECDSA P-256", leaf.PublicKey)
	}
	if _, ok := c.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Fatalf("private key %T", c.PrivateKey)
	}
	if !leaf.NotBefore.Equal(now.Add(-5*time.Minute)) || !leaf.NotAfter.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("validity %s – %s", leaf.NotBefore, leaf.NotAfter)
	}
	if leaf.IsCA || len(c.Certificate) != 2 {
		t.Fatalf("IsCA %v, chain of %d", leaf.IsCA, len(c.Certificate))
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "api.llm.example", Roots: ca.pool(), CurrentTime: now}); err != nil {
		t.Fatalf("the leaf does not verify against the CA: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.llm.example", Roots: ca.pool(), CurrentTime: now}); err == nil {
		t.Fatal("the leaf verifies for another name")
	}
}

func TestLeafNotPastCA(t *testing.T) {
	ca := newTestCA(t, "short", func(c *x509.Certificate) { c.NotAfter = time.Now().Add(time.Hour) })
	leaves, err := NewLeaves(ca.load(t), LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := leaves.Get("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf.NotAfter.After(ca.cert.NotAfter) {
		t.Fatalf("leaf NotAfter %s after the CA's %s", c.Leaf.NotAfter, ca.cert.NotAfter)
	}
}

func TestLeafRefusesNoName(t *testing.T) {
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"", "10.0.0.1", "2001:db8::1"} {
		if _, err := leaves.Get(n); !errors.Is(err, ErrNoName) {
			t.Errorf("Get(%q) = %v; want ErrNoName", n, err)
		}
	}
}

// TestLeafMintedOnce: many concurrent first uses of one name mint one leaf
// and all get it.
func TestLeafMintedOnce(t *testing.T) {
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		got   [n]*tls.Certificate
		fails atomic.Int32
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := leaves.Get("same.example")
			if err != nil {
				fails.Add(1)
			}
			got[i] = c
		}()
	}
	close(start)
	wg.Wait()
	if fails.Load() != 0 || leaves.Minted() != 1 {
		t.Fatalf("%d failures, %d leaves minted; want 0 and 1", fails.Load(), leaves.Minted())
	}
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("caller %d got another leaf", i)
		}
	}
}

func TestLeafRenewBeforeExpiry(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	clock := func() time.Time { return *now.Load() }
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := leaves.Get("r.example")
	t1 := t0.Add(15 * time.Hour) // 9h left: more than RenewBefore (8h)
	now.Store(&t1)
	if c, _ := leaves.Get("r.example"); c != first || leaves.Minted() != 1 {
		t.Fatalf("renewed with 9h left (minted %d)", leaves.Minted())
	}
	t2 := t0.Add(17 * time.Hour) // 7h left
	now.Store(&t2)
	second, err := leaves.Get("r.example")
	if err != nil || second == first || leaves.Minted() != 2 {
		t.Fatalf("not renewed with 7h left: %v, minted %d", err, leaves.Minted())
	}
	if !second.Leaf.NotAfter.Equal(t2.Add(24 * time.Hour).Truncate(time.Second)) {
		t.Fatalf("renewed leaf NotAfter %s", second.Leaf.NotAfter)
	}
}

// TestLeafSetCA: after SetCA (a renewed inspection CA) every leaf comes
// from the new CA, cached ones included, and a hit still allocates
// nothing.
func TestLeafSetCA(t *testing.T) {
	old, renewed := newTestCA(t, "ca", nil), newTestCA(t, "ca renewed", nil)
	leaves, err := NewLeaves(old.load(t), LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	issuer := func() string {
		t.Helper()
		c, err := leaves.Get("api.llm.example")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Leaf.CheckSignatureFrom(map[string]*x509.Certificate{"ca": old.cert, "ca renewed": renewed.cert}[c.Leaf.Issuer.CommonName]); err != nil {
			t.Fatalf("leaf not signed by its issuer %q: %v", c.Leaf.Issuer.CommonName, err)
		}
		return c.Leaf.Issuer.CommonName
	}
	if got := issuer(); got != "ca" {
		t.Fatalf("issuer %q", got)
	}
	leaves.SetCA(renewed.load(t))
	if got := issuer(); got != "ca renewed" {
		t.Fatalf("after SetCA the issuer is %q; want the renewed CA", got)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = leaves.Get("api.llm.example") }); n != 0 {
		t.Fatalf("a hit after SetCA allocates %v times", n)
	}
	leaves.SetCA(nil) // ignored
	if got := issuer(); got != "ca renewed" {
		t.Fatalf("SetCA(nil) changed the issuer to %q", got)
	}
}

func TestLeafCacheEvicts(t *testing.T) {
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.example", "b.example", "c.example", "a.example"} {
		if _, err := leaves.Get(n); err != nil {
			t.Fatal(err)
		}
	}
	if leaves.Minted() != 4 {
		t.Fatalf("minted %d; want 4 (a evicted by c)", leaves.Minted())
	}
}

// TestLeafCounters: every Get counts one of hit, minted and failed;
// concurrent first uses of a name count one minted and the rest hits; a
// renewal is a minting.
func TestLeafCounters(t *testing.T) {
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	var hit, minted, failed counter
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{
		Now:      func() time.Time { return *now.Load() },
		Counters: LeafCounters{Hit: &hit, Minted: &minted, Failed: &failed},
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	steps := []struct {
		name                string
		do                  func(t *testing.T)
		hit, minted, failed int64 // totals after the step
	}{
		{"first use", func(t *testing.T) { mustGet(t, leaves, "a.example") }, 0, 1, 0},
		{"cached", func(t *testing.T) { mustGet(t, leaves, "a.example") }, 1, 1, 0},
		{"no name", func(t *testing.T) { _, _ = leaves.Get("") }, 1, 1, 1},
		{"an address", func(t *testing.T) { _, _ = leaves.Get("192.0.2.1") }, 1, 1, 2},
		{"concurrent first uses", func(t *testing.T) {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					if _, err := leaves.Get("b.example"); err != nil {
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
		}, 1 + n - 1, 2, 2},
		{"renewal", func(t *testing.T) {
			later := t0.Add(17 * time.Hour) // 7h left of 24h: under RenewBefore
			now.Store(&later)
			mustGet(t, leaves, "a.example")
		}, n, 3, 2},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do(t)
			if hit.n.Load() != s.hit || minted.n.Load() != s.minted || failed.n.Load() != s.failed {
				t.Fatalf("hit %d minted %d failed %d; want %d %d %d", hit.n.Load(), minted.n.Load(), failed.n.Load(), s.hit, s.minted, s.failed)
			}
		})
	}
	if leaves.Minted() != minted.n.Load() {
		t.Fatalf("Minted() %d, the counter %d", leaves.Minted(), minted.n.Load())
	}
}

// counter is a Counter for tests.
type counter struct{ n atomic.Int64 }

func (c *counter) Inc() { c.n.Add(1) }

func mustGet(t *testing.T, l *Leaves, name string) {
	t.Helper()
	if _, err := l.Get(name); err != nil {
		t.Fatal(err)
	}
}

// TestLeafHitNoAlloc: a cache hit through the TLS callback allocates
// nothing (the handshake's own allocations aside), with its Prometheus
// counter counting it.
func TestLeafHitNoAlloc(t *testing.T) {
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "hits"})
	leaves, err := NewLeaves(newTestCA(t, "ca", nil).load(t), LeafConfig{Counters: LeafCounters{Hit: hits}})
	if err != nil {
		t.Fatal(err)
	}
	get := leaves.GetCertificate("hit.example")
	hello := &tls.ClientHelloInfo{ServerName: "hit.example"}
	if _, err := get(hello); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := get(hello); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a leaf cache hit allocates %v times; want 0", n)
	}
	var m dto.Metric
	if err := hits.Write(&m); err != nil || m.GetCounter().GetValue() < 1000 {
		t.Fatalf("hits counted %v (%v); want at least 1000", m.GetCounter().GetValue(), err)
	}
}

func BenchmarkLeafHit(b *testing.B) {
	leaves, err := NewLeaves(newTestCA(b, "ca", nil).load(b), LeafConfig{})
	if err != nil {
		b.Fatal(err)
	}
	get := leaves.GetCertificate("hit.example")
	hello := &tls.ClientHelloInfo{ServerName: "hit.example"}
	if _, err := get(hello); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := get(hello); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLeafMint(b *testing.B) {
	ca := newTestCA(b, "ca", nil).load(b)
	leaves, err := NewLeaves(ca, LeafConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := leaves.mint(ca, "mint.example"); err != nil {
			b.Fatal(err)
		}
	}
}
