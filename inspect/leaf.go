package inspect

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/egressd/egressd/certs"
)

// LeafConfig configures Leaves. Zero values mean the defaults.
type LeafConfig struct {
	// Lifetime of a leaf from its minting; zero means 24h. Short: a leaf
	// that leaks is good for a day, and nothing revokes it.
	Lifetime time.Duration
	// Backdate sets NotBefore this far before the minting, for clients
	// whose clocks run behind; zero means 5m.
	Backdate time.Duration
	// RenewBefore mints a new leaf for a name once its cached one has
	// less than this left; zero means Lifetime/3.
	RenewBefore time.Duration
	// CacheSize is how many leaves are kept (least recently used out);
	// zero means 4096. One leaf is about 1.5 KiB.
	CacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand is the entropy certs.IssueWith draws serials from; nil means
	// crypto/rand.
	Rand io.Reader
}

// Leaves mints and caches one leaf certificate per host name, signed by
// the inspection CA through certs.IssueWith: ECDSA P-256, the name as its
// only SAN, short-lived. Concurrent first uses of a name mint once. Safe
// for concurrent use.
type Leaves struct {
	ca    *certs.CA
	cfg   LeafConfig
	cache *lru.Cache[string, *tls.Certificate]

	mu       sync.Mutex
	inflight map[string]*mint

	minted atomic.Int64 // leaves minted, for tests and metrics
}

// mint is one minting in progress; waiters block on done.
type mint struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// NewLeaves returns a leaf cache for ca (certs.LoadCAFiles of
// --inspect-ca-cert and --inspect-ca-key).
func NewLeaves(ca *certs.CA, cfg LeafConfig) (*Leaves, error) {
	if ca == nil {
		return nil, fmt.Errorf("inspect: NewLeaves: no CA")
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 24 * time.Hour
	}
	if cfg.Backdate <= 0 {
		cfg.Backdate = 5 * time.Minute
	}
	if cfg.RenewBefore <= 0 || cfg.RenewBefore >= cfg.Lifetime {
		cfg.RenewBefore = cfg.Lifetime / 3
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	cache, err := lru.New[string, *tls.Certificate](cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("inspect: leaf cache: %w", err)
	}
	return &Leaves{ca: ca, cfg: cfg, cache: cache, inflight: make(map[string]*mint)}, nil
}

// Minted returns how many leaves have been minted.
func (l *Leaves) Minted() int64 { return l.minted.Load() }

// Get returns the leaf for name (a normalized host name): the cached one
// while it has more than RenewBefore left, else a new one. A hit does not
// allocate.
func (l *Leaves) Get(name string) (*tls.Certificate, error) {
	if c, ok := l.cache.Get(name); ok && l.cfg.Now().Before(c.Leaf.NotAfter.Add(-l.cfg.RenewBefore)) {
		return c, nil
	}
	return l.mintOnce(name)
}

// mintOnce mints the leaf for name, once for all concurrent callers.
func (l *Leaves) mintOnce(name string) (*tls.Certificate, error) {
	l.mu.Lock()
	if m, ok := l.inflight[name]; ok {
		l.mu.Unlock()
		<-m.done
		return m.cert, m.err
	}
	// A caller that waited for the lock may find the leaf another one
	// just minted.
	if c, ok := l.cache.Peek(name); ok && l.cfg.Now().Before(c.Leaf.NotAfter.Add(-l.cfg.RenewBefore)) {
		l.mu.Unlock()
		return c, nil
	}
	m := &mint{done: make(chan struct{})}
	l.inflight[name] = m
	l.mu.Unlock()

	m.cert, m.err = l.mint(name)
	if m.err == nil {
		l.cache.Add(name, m.cert)
	}
	l.mu.Lock()
	delete(l.inflight, name)
	l.mu.Unlock()
	close(m.done)
	return m.cert, m.err
}

// mint makes a leaf: ECDSA P-256, SAN exactly name, serverAuth, valid
// from Backdate ago for Lifetime (never past the CA's own NotAfter).
func (l *Leaves) mint(name string) (*tls.Certificate, error) {
	if name == "" {
		return nil, ErrNoName
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return nil, fmt.Errorf("%w: %q is an IP address", ErrNoName, name)
	}
	c, err := l.ca.IssueWith(certs.LeafConfig{Hosts: []string{name}, Validity: l.cfg.Lifetime,
		Backdate: l.cfg.Backdate, Now: l.cfg.Now(), Rand: l.cfg.Rand, ServerOnly: true})
	if err != nil {
		return nil, fmt.Errorf("inspect: leaf for %q: %w", name, err)
	}
	l.minted.Add(1)
	return &c, nil
}

// GetCertificate returns a tls.Config.GetCertificate for a tunnel to
// host: the leaf for host when the ClientHello's SNI is host, else
// ErrSNIMismatch (a ClientHello without SNI gets host's leaf: the tunnel
// names the host). The closure is made once per tunnel; a call that hits
// the cache does not allocate.
func (l *Leaves) GetCertificate(host string) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName != "" && !sameHost(hello.ServerName, host) {
			return nil, ErrSNIMismatch
		}
		return l.Get(host)
	}
}
