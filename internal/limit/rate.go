package limit

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Rate is a token bucket per source IP (golang.org/x/time/rate): Rate per
// second, Burst at most. The DNS server asks it once per query, so the
// buckets are a sync.Map (a lookup takes no lock; each bucket has its own)
// rather than one map behind one mutex. Buckets of sources that have been
// quiet long enough to be full again are dropped, so memory follows the
// active clients, not every address ever seen. Safe for concurrent use.
//
// Whole-path A/B against the hand-written bucket it replaced (issue 16):
// no loss beyond the spread, so the library stays; figures and method in
// bench/dns/rate-ab.md.
type Rate struct {
	limit rate.Limit // tokens per second; <= 0: no limit
	burst int
	full  time.Duration // how long an empty bucket takes to refill
	now   func() time.Time

	buckets sync.Map // netip.Addr → *rate.Limiter
	sweep   atomic.Int64
	sweepMu sync.Mutex // one sweeper at a time; Allow never waits for it
}

// NewRate returns a limiter of perSec requests per second per source with
// bursts of burst (zero means perSec, at least 1). perSec <= 0 means no
// limit. now is the clock; nil means time.Now.
func NewRate(perSec float64, burst int, now func() time.Time) *Rate {
	if now == nil {
		now = time.Now
	}
	if burst <= 0 {
		burst = int(max(perSec, 1))
	}
	r := &Rate{limit: rate.Limit(perSec), burst: burst, now: now}
	if perSec > 0 {
		r.full = time.Duration(float64(burst) / perSec * float64(time.Second))
	}
	return r
}

// Allow takes a token for src; false when src is over its rate.
func (r *Rate) Allow(src netip.Addr) bool {
	if r == nil || r.limit <= 0 {
		return true
	}
	now := r.now()
	if now.UnixNano() > r.sweep.Load() {
		r.sweepFull(now)
	}
	l, ok := r.buckets.Load(src)
	if !ok {
		l, _ = r.buckets.LoadOrStore(src, rate.NewLimiter(r.limit, r.burst))
	}
	return l.(*rate.Limiter).AllowN(now, 1)
}

// sweepFull drops buckets that have refilled: they behave like new ones.
// A request that loaded a bucket just before it was dropped spends its
// token from the dropped one, so a client gains at most one token per
// sweep, and only from a bucket that was full.
func (r *Rate) sweepFull(now time.Time) {
	if !r.sweepMu.TryLock() {
		return
	}
	defer r.sweepMu.Unlock()
	r.buckets.Range(func(src, l any) bool {
		if l.(*rate.Limiter).TokensAt(now) >= float64(r.burst) {
			r.buckets.Delete(src)
		}
		return true
	})
	r.sweep.Store(now.Add(max(r.full, time.Second)).UnixNano())
}
