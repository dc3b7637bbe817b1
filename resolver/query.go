package resolver

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"
)

// Result is the answer of Query for one (name, type).
type Result struct {
	// Msg holds Rcode, Answer and Ns (the SOA of a negative answer). Its
	// records are copies whose TTLs count down from the cached lifetime:
	// the caller may modify them.
	Msg      *dns.Msg
	Cached   bool // served from the cache without asking an upstream
	Stale    bool // expired entry served because every upstream failed (RFC 8767)
	Upstream string
	Duration time.Duration
}

type beforeWaitKey struct{}

// WithBeforeWait returns a context carrying f, which Query, LookupIP and
// Client.Exchange call before they first wait on the network or on
// another caller's query to the same name: Client.Exchange once the
// question has left for the upstream, Query once its question is on its
// way in the flight's own goroutine (or it joined another caller's), so
// that whatever f hands off overlaps the upstream's work. The DNS server
// hands its UDP socket on to another reader there. f may be called more
// than once and must then do nothing; it is not called when nothing waits
// (a cache hit, a recent failure).
func WithBeforeWait(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, beforeWaitKey{}, f)
}

func beforeWait(ctx context.Context) {
	if f, ok := ctx.Value(beforeWaitKey{}).(func()); ok && f != nil {
		f()
	}
}

// Query answers (name, qtype) in class IN from the cache or, on a miss,
// from the upstreams; concurrent identical misses share one upstream
// query. When every upstream fails and an expired entry is still inside
// its stale horizon, that entry is served with Stale set and a TTL of 30s.
// NXDOMAIN is a Result, not an error; errors wrap ErrUpstream,
// ErrInvalidName or the context's error.
func (r *Resolver) Query(ctx context.Context, name string, qtype uint16) (*Result, error) {
	start := time.Now()
	n, err := fqdnKey(name)
	if err != nil {
		return nil, err
	}
	k := cacheKey{name: n, qtype: qtype, qclass: dns.ClassINET}
	if res, err, ok := r.answerNow(k, start); ok {
		return res, err
	}
	r.cache.misses.Inc()
	// The fetch runs in the flight's goroutine (flightGroup.do): the
	// caller's before-wait func is the caller's to call, on its own wait.
	fctx := context.WithValue(ctx, beforeWaitKey{}, (func())(nil))
	res := r.flights.do(ctx, k, func() fetchResult { return r.fetch(fctx, k) })
	if res.err != nil {
		return nil, fmt.Errorf("query %s %s: %w", n, dns.TypeToString[qtype], res.err)
	}
	if res.stale {
		r.cache.staleSeconds.Observe(time.Since(start).Seconds())
	}
	return &Result{
		Msg:      answerFrom(res.e, r.cfg.Now(), res.stale),
		Stale:    res.stale,
		Upstream: res.e.upstream,
		Duration: time.Since(start),
	}, nil
}

// View is what one caller makes of cached answers (the DNS server: the
// sections it hands to pods and the texts of its record), computed once
// per cache entry and second of its countdown instead of once a query.
// Each View keeps its own: two Views of one Resolver recompute rather than
// share each other's.
type View[V any] struct {
	r    *Resolver
	make func(*dns.Msg) V
}

// NewView returns the View of r whose values make computes from a fresh
// entry's shared answer. make must not modify the message.
func NewView[V any](r *Resolver, make func(*dns.Msg) V) *View[V] {
	return &View[V]{r: r, make: make}
}

// Cached is Query for a fresh cache hit only, for the DNS server: false
// means Query would have to ask (or wait for) an upstream. A hit is
// counted; a miss is not (the Query that follows counts it). Unlike
// Query's, the Msg and its records are shared with every other hit in the
// same second of the entry's countdown and must not be modified; so is
// the value v's function made of that Msg, handed to every hit of that
// second. A hit is not timed (Duration 0). name need not be valid: an
// invalid name is never cached.
func (v *View[V]) Cached(name string, qtype uint16) (Result, V, bool) {
	r := v.r
	now := r.cfg.Now()
	e, fresh := r.cache.get(cacheKey{name: dns.Fqdn(LowerASCII(name)), qtype: qtype, qclass: dns.ClassINET}, now)
	if !fresh {
		var zero V
		return Result{}, zero, false
	}
	r.cache.hits.Inc()
	ev := e.view.Load()
	ttl := uint32(e.expires.Sub(now) / time.Second)
	if ev == nil || ev.ttl != ttl || ev.owner != v {
		m := answerFrom(e, now, false)
		ev = &entryView{ttl: ttl, msg: m, owner: v, val: v.make(m)}
		e.view.Store(ev)
	}
	// ev.owner is v: ev.val was made by v.make, a V.
	return Result{Msg: ev.msg, Cached: true, Upstream: e.upstream}, ev.val.(V), true
}

// queryNow is what Query answers without asking or waiting for an
// upstream: a fresh cache entry or a recent failure; false when Query
// would ask.
func (r *Resolver) queryNow(name string, qtype uint16) (*Result, error, bool) {
	start := time.Now()
	n, err := fqdnKey(name)
	if err != nil {
		return nil, err, true
	}
	return r.answerNow(cacheKey{name: n, qtype: qtype, qclass: dns.ClassINET}, start)
}

// answerNow answers k from the cache or from a recent failure (a miss,
// counted); false when neither holds it.
func (r *Resolver) answerNow(k cacheKey, start time.Time) (*Result, error, bool) {
	if res, ok := r.fromCache(k, start); ok {
		return res, nil, true
	}
	if res, err, ok := r.recentFailure(k, start); ok {
		r.cache.misses.Inc()
		return res, err, true
	}
	return nil, nil, false
}

// recentFailure answers k from a failure inside its FailureTTL window
// (failures.go): the stale entry when there is one, as right after the
// failure, else the failure's error (failureErr); false when k has no
// such failure.
func (r *Resolver) recentFailure(k cacheKey, start time.Time) (*Result, error, bool) {
	now := r.cfg.Now()
	err, ok := r.failed.get(k, now)
	if !ok {
		return nil, nil, false
	}
	if e, ok := r.cache.stale(k, now); ok {
		return &Result{Msg: answerFrom(e, now, true), Stale: true, Upstream: e.upstream, Duration: time.Since(start)}, nil, true
	}
	return nil, err, true
}

// failureErr is the error that the queries for k within the failure's
// FailureTTL window answer; made once, when the failure is remembered, not
// per query (a question upstream always refuses, AAAA on some servers, is
// asked by every new connection).
func (r *Resolver) failureErr(k cacheKey, err error) error {
	return fmt.Errorf("query %s %s: %w (a failure of the last %s, not asked again: RFC 9520)",
		k.name, dns.TypeToString[k.qtype], err, r.cfg.FailureTTL)
}

func (r *Resolver) fromCache(k cacheKey, start time.Time) (*Result, bool) {
	now := r.cfg.Now()
	e, fresh := r.cache.get(k, now)
	if !fresh {
		return nil, false
	}
	r.cache.hits.Inc()
	return &Result{Msg: answerFrom(e, now, false), Cached: true, Upstream: e.upstream, Duration: time.Since(start)}, true
}

// fetch asks the upstreams for k and caches the answer. It runs detached
// from the caller's cancellation (others may be waiting on it) but bounded:
// every upstream once over UDP and once over TCP.
func (r *Resolver) fetch(ctx context.Context, k cacheKey) fetchResult {
	until := time.Now().Add(time.Duration(2*len(r.up.addrs)) * r.cfg.Timeout)
	resp, addr, err := r.up.exchange(context.WithoutCancel(ctx), until, k.name, k.qtype, k.qclass)
	now := r.cfg.Now()
	if err != nil {
		if r.cfg.FailureTTL > 0 {
			r.failed.put(k, now.Add(r.cfg.FailureTTL), r.failureErr(k, err))
		}
		// RFC 8767 §4: answer from an expired entry only once resolution
		// has failed.
		if e, ok := r.cache.stale(k, now); ok {
			return fetchResult{e: e, stale: true}
		}
		return fetchResult{err: err}
	}
	r.failed.forget(k)
	e := &entry{
		msg:      &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: resp.Rcode}, Answer: resp.Answer, Ns: resp.Ns},
		upstream: addr,
	}
	life := r.lifetime(e.msg)
	e.expires = now.Add(life)
	e.staleUntil = e.expires
	if life > 0 {
		e.staleUntil = e.expires.Add(r.cfg.StaleFor)
		r.cache.put(k, e)
	}
	return fetchResult{e: e}
}
