package resolver

import (
	"fmt"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/internal/metrics"
)

// cacheKey is what an answer depends on (RFC 1034 §3.7): the name in lower
// case and fully qualified, the type and the class.
type cacheKey struct {
	name   string
	qtype  uint16
	qclass uint16
}

// entry is one cached answer. msg is never modified after insertion:
// readers copy the records they hand out.
type entry struct {
	msg        *dns.Msg // Rcode, Answer and Ns of the upstream answer; no Extra
	expires    time.Time
	staleUntil time.Time // serve-stale horizon (RFC 8767); equals expires when disabled
	upstream   string
	// promoted is the cache's tick when the entry was last moved to the
	// front of the LRU (cache.get).
	promoted atomic.Uint64
	// view is the answer with the TTLs of one second of the countdown,
	// shared read-only by the DNS server's cache hits (View.Cached): a
	// popular name is copied once a second instead of once a query.
	view atomic.Pointer[entryView]
}

type entryView struct {
	ttl   uint32
	msg   *dns.Msg
	owner any // the *View[V] that made val
	val   any // a V: what owner's function made of msg
}

// cache is the one LRU of the process. The LRU bounds the entry count;
// expired entries stay until they fall past their stale horizon or out of
// the LRU, so that serve-stale has something to serve.
type cache struct {
	lru     *lru.Cache[cacheKey, *entry]
	metrics *metrics.Metrics
	// The counters every query touches, looked up once.
	hits, misses prometheus.Counter
	staleSeconds prometheus.Observer
	// tick counts the moves to the front of the LRU (insertions and
	// promotions). An entry promoted less than half the LRU's size ago is
	// still in its front half, so a hit on it need not take the LRU's
	// exclusive lock to promote it again: a warm cache's hits share a read
	// lock, and the least recently used half is still what gets evicted.
	tick      atomic.Uint64
	promoteAt uint64
}

func newCache(size int, m *metrics.Metrics) (*cache, error) {
	l, err := lru.New[cacheKey, *entry](size)
	if err != nil {
		return nil, fmt.Errorf("resolver: cache: %w", err)
	}
	return &cache{lru: l, metrics: m, promoteAt: uint64(max(size/2, 1)),
		hits: m.CacheHits, misses: m.CacheMisses, staleSeconds: m.DNSSeconds.WithLabelValues("stale")}, nil
}

// get returns the entry for k and whether it is still fresh at now. An
// entry past its stale horizon is dropped and not returned.
func (c *cache) get(k cacheKey, now time.Time) (*entry, bool) {
	e, ok := c.lru.Peek(k)
	if !ok {
		return nil, false
	}
	if c.tick.Load()-e.promoted.Load() >= c.promoteAt {
		e.promoted.Store(c.tick.Add(1))
		c.lru.Get(k)
	}
	if !now.Before(e.staleUntil) {
		c.lru.Remove(k)
		c.metrics.CacheSize.Set(float64(c.lru.Len()))
		return nil, false
	}
	return e, now.Before(e.expires)
}

// stale returns k's entry while it may still be served stale at now (RFC
// 8767), without touching its recency: only after resolution failed.
func (c *cache) stale(k cacheKey, now time.Time) (*entry, bool) {
	e, ok := c.lru.Peek(k)
	if !ok || !now.Before(e.staleUntil) {
		return nil, false
	}
	return e, true
}

func (c *cache) put(k cacheKey, e *entry) {
	e.promoted.Store(c.tick.Add(1))
	c.lru.Add(k, e)
	c.metrics.CacheSize.Set(float64(c.lru.Len()))
}

func (c *cache) len() int { return c.lru.Len() }

// lifetime returns how long msg may be cached, or 0 for "do not cache".
// Positive answers live for their smallest record TTL; negative ones
// (NXDOMAIN, and NODATA: NOERROR without an answer) for min(SOA TTL, SOA
// MINIMUM) of the authority section (RFC 2308 §5), and are not cached at
// all without a SOA. Both are clamped to the configured bounds.
func (r *Resolver) lifetime(msg *dns.Msg) time.Duration {
	var ttl uint32
	switch {
	case msg.Rcode == dns.RcodeSuccess && len(msg.Answer) > 0:
		ttl = MinTTL(msg.Answer)
		return clampTTL(ttl, r.cfg.MinTTL, r.cfg.MaxTTL)
	case msg.Rcode == dns.RcodeSuccess || msg.Rcode == dns.RcodeNameError:
		soa := findSOA(msg.Ns)
		if soa == nil {
			return 0
		}
		ttl = min(soa.Hdr.Ttl, soa.Minttl)
		return clampTTL(ttl, r.cfg.MinTTL, r.cfg.MaxNegativeTTL)
	}
	return 0
}

func clampTTL(ttl uint32, lo, hi time.Duration) time.Duration {
	d := time.Duration(ttl) * time.Second
	if d < lo {
		d = lo
	}
	if d > hi {
		d = hi
	}
	return d
}

// MinTTL returns the smallest TTL of rrs (OPT records aside), the
// lifetime of an answer; 2^31-1 for none (RFC 2181 §8).
func MinTTL(rrs []dns.RR) uint32 {
	ttl := uint32(1<<31 - 1) // RFC 2181 §8: TTLs are at most 2^31-1
	for _, rr := range rrs {
		if h := rr.Header(); h.Rrtype != dns.TypeOPT && h.Ttl < ttl {
			ttl = h.Ttl
		}
	}
	return ttl
}

func findSOA(rrs []dns.RR) *dns.SOA {
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa
		}
	}
	return nil
}

// answerFrom copies e into a fresh message whose record TTLs all equal the
// remaining lifetime (as CoreDNS's cache does), or staleTTL when stale.
func answerFrom(e *entry, now time.Time, stale bool) *dns.Msg {
	ttl := uint32(staleTTL)
	if !stale {
		ttl = uint32(e.expires.Sub(now) / time.Second)
	}
	m := &dns.Msg{}
	m.Rcode = e.msg.Rcode
	m.Answer = copyRRs(e.msg.Answer, ttl)
	m.Ns = copyRRs(e.msg.Ns, ttl)
	return m
}

func copyRRs(rrs []dns.RR, ttl uint32) []dns.RR {
	if len(rrs) == 0 {
		return nil
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		c := dns.Copy(rr)
		c.Header().Ttl = ttl
		out[i] = c
	}
	return out
}
