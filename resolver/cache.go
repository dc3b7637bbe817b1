package resolver

import (
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/miekg/dns"

	"github.com/egressd/egressd/metrics"
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
}

// cache is the one LRU of the process. The LRU bounds the entry count;
// expired entries stay until they fall past their stale horizon or out of
// the LRU, so that serve-stale has something to serve.
type cache struct {
	lru     *lru.Cache[cacheKey, *entry]
	metrics *metrics.Metrics
}

func newCache(size int, m *metrics.Metrics) (*cache, error) {
	l, err := lru.New[cacheKey, *entry](size)
	if err != nil {
		return nil, fmt.Errorf("resolver: cache: %w", err)
	}
	return &cache{lru: l, metrics: m}, nil
}

// get returns the entry for k and whether it is still fresh at now. An
// entry past its stale horizon is dropped and not returned.
func (c *cache) get(k cacheKey, now time.Time) (*entry, bool) {
	e, ok := c.lru.Get(k)
	if !ok {
		return nil, false
	}
	if !now.Before(e.staleUntil) {
		c.lru.Remove(k)
		c.metrics.CacheSize.Set(float64(c.lru.Len()))
		return nil, false
	}
	return e, now.Before(e.expires)
}

func (c *cache) put(k cacheKey, e *entry) {
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
		ttl = minTTL(msg.Answer)
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

func minTTL(rrs []dns.RR) uint32 {
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
