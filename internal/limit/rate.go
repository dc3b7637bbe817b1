package limit

import (
	"net/netip"
	"sync"
	"time"
)

// Rate is a token bucket per source IP: Rate per second, Burst at most.
// Buckets of sources that have been quiet long enough to be full again are
// dropped, so memory follows the active clients, not every address ever
// seen. Safe for concurrent use.
type Rate struct {
	rate  float64 // tokens per second; <= 0: no limit
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	sweep   time.Time // next sweep of full buckets
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRate returns a limiter of perSec requests per second per source with
// bursts of burst (zero means perSec, at least 1). perSec <= 0 means no
// limit. now is the clock; nil means time.Now.
func NewRate(perSec float64, burst int, now func() time.Time) *Rate {
	if now == nil {
		now = time.Now
	}
	b := float64(burst)
	if b <= 0 {
		b = max(perSec, 1)
	}
	return &Rate{rate: perSec, burst: b, now: now, buckets: map[netip.Addr]*bucket{}}
}

// Allow takes a token for src; false when src is over its rate.
func (r *Rate) Allow(src netip.Addr) bool {
	if r == nil || r.rate <= 0 {
		return true
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.After(r.sweep) {
		r.sweepLocked(now)
	}
	b := r.buckets[src]
	if b == nil {
		b = &bucket{tokens: r.burst, last: now}
		r.buckets[src] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(r.burst, b.tokens+el*r.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweepLocked drops buckets that have refilled: they behave like new ones.
func (r *Rate) sweepLocked(now time.Time) {
	full := time.Duration(r.burst / r.rate * float64(time.Second))
	for src, b := range r.buckets {
		if now.Sub(b.last) >= full {
			delete(r.buckets, src)
		}
	}
	r.sweep = now.Add(max(full, time.Second))
}
