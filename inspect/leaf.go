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
	"golang.org/x/sync/singleflight"

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
	// Counters count what Get answers (egressd_inspect_leaves_total);
	// a nil one counts nothing.
	Counters LeafCounters
}

// LeafCounters count leaf lookups, one of the three per Get: Hit (the
// cached leaf, or the one a concurrent first use of the name minted),
// Minted (this Get signed a new leaf: a first use, a renewal, a name the
// cache had evicted) and Failed (no leaf: the client's handshake fails).
type LeafCounters struct {
	Hit, Minted, Failed Counter
}

// Counter is what LeafCounters count with; a prometheus.Counter is one.
// Inc must not allocate (a cache hit does not).
type Counter interface{ Inc() }

// noCount is the Counter of a nil LeafCounters field.
type noCount struct{}

func (noCount) Inc() {}

// Leaves mints and caches one leaf certificate per host name, signed by
// the inspection CA through certs.IssueWith: ECDSA P-256, the name as its
// only SAN, short-lived. Concurrent first uses of a name mint once. Safe
// for concurrent use.
type Leaves struct {
	ca    atomic.Pointer[certs.CA] // replaced by SetCA
	cfg   LeafConfig
	cache *lru.Cache[string, *tls.Certificate]

	// mu orders SetCA's swap and purge against caching a new leaf.
	mu     sync.Mutex
	flight singleflight.Group // one minting per name at a time

	minted atomic.Int64 // leaves minted, for tests and metrics
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
	for _, c := range []*Counter{&cfg.Counters.Hit, &cfg.Counters.Minted, &cfg.Counters.Failed} {
		if *c == nil {
			*c = noCount{}
		}
	}
	cache, err := lru.New[string, *tls.Certificate](cfg.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("inspect: leaf cache: %w", err)
	}
	l := &Leaves{cfg: cfg, cache: cache}
	l.ca.Store(ca)
	return l, nil
}

// SetCA makes ca sign every leaf from now on (a renewed inspection CA,
// --inspect-ca-cert reloaded) and drops the cached leaves of the old one;
// a leaf the old CA was signing meanwhile is handed to its callers but not
// cached.
func (l *Leaves) SetCA(ca *certs.CA) {
	if ca == nil {
		return
	}
	l.mu.Lock()
	l.ca.Store(ca)
	l.cache.Purge()
	l.mu.Unlock()
}

// Minted returns how many leaves have been minted.
func (l *Leaves) Minted() int64 { return l.minted.Load() }

// Get returns the leaf for name (a normalized host name): the cached one
// while it has more than RenewBefore left, else a new one. Each call
// counts one of Counters. A hit does not allocate.
func (l *Leaves) Get(name string) (*tls.Certificate, error) {
	if c, ok := l.cache.Get(name); ok && l.fresh(c) {
		l.cfg.Counters.Hit.Inc()
		return c, nil
	}
	c, minted, err := l.mintOnce(name)
	switch {
	case err != nil:
		l.cfg.Counters.Failed.Inc()
	case minted:
		l.cfg.Counters.Minted.Inc()
	default:
		l.cfg.Counters.Hit.Inc()
	}
	return c, err
}

// fresh reports whether the cached leaf c has more than RenewBefore left.
func (l *Leaves) fresh(c *tls.Certificate) bool {
	return l.cfg.Now().Before(c.Leaf.NotAfter.Add(-l.cfg.RenewBefore))
}

// mintOnce mints the leaf for name, once for all concurrent callers
// (golang.org/x/sync/singleflight); minted is true for the caller that
// signed it.
func (l *Leaves) mintOnce(name string) (c *tls.Certificate, minted bool, err error) {
	v, err, _ := l.flight.Do(name, func() (any, error) {
		// A caller that came as another's minting ended may find the
		// leaf it cached.
		if c, ok := l.cache.Peek(name); ok && l.fresh(c) {
			return c, nil
		}
		ca := l.ca.Load()
		c, err := l.mint(ca, name)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.ca.Load() == ca { // not signed by a CA SetCA replaced
			l.cache.Add(name, c)
		}
		l.mu.Unlock()
		minted = true
		return c, nil
	})
	c, _ = v.(*tls.Certificate)
	return c, minted, err
}

// mint makes a leaf: ECDSA P-256, SAN exactly name, serverAuth, valid
// from Backdate ago for Lifetime (never past the CA's own NotAfter).
func (l *Leaves) mint(ca *certs.CA, name string) (*tls.Certificate, error) {
	if name == "" {
		return nil, ErrNoName
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return nil, fmt.Errorf("%w: %q is an IP address", ErrNoName, name)
	}
	c, err := ca.IssueWith(certs.LeafConfig{Hosts: []string{name}, Validity: l.cfg.Lifetime,
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
