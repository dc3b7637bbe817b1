package resolver

import (
	"sync"
	"time"
)

// failures remembers the questions whose resolution failed (every upstream
// timed out, answered SERVFAIL or REFUSED, or sent garbage), for
// FailureTTL: RFC 9520 asks a resolver to cache resolution failures
// instead of asking again at once. Within that window a query for the same
// (name, type) gets the failure (or the stale entry, RFC 8767, as right
// after the failure itself) without a packet upstream: a failing upstream
// is not hammered by every retrying client, and a question that upstream
// always refuses (AAAA on some servers) costs one exchange a window, not
// one per connection.
//
// It is bounded by the cache's size: a new failure that finds it full
// starts it afresh (clear), so that a flood of distinct failing names
// costs no scan per query; the failures dropped are only asked again.
type failures struct {
	mu  sync.Mutex
	m   map[cacheKey]failure
	max int
}

type failure struct {
	until time.Time
	err   error
}

// get returns the error of a failure of k that is still inside its window.
func (f *failures) get(k cacheKey, now time.Time) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.m[k]
	if !ok {
		return nil, false
	}
	if !now.Before(x.until) {
		delete(f.m, k)
		return nil, false
	}
	return x.err, true
}

// put remembers a failure of k until until.
func (f *failures) put(k cacheKey, until time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[cacheKey]failure)
	}
	if _, ok := f.m[k]; !ok && len(f.m) >= f.max {
		clear(f.m)
	}
	f.m[k] = failure{until: until, err: err}
}

// forget drops k's failure: an answer arrived.
func (f *failures) forget(k cacheKey) {
	f.mu.Lock()
	delete(f.m, k)
	f.mu.Unlock()
}
