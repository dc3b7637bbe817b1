package resolver

import (
	"context"
	"sync"
)

// flightGroup coalesces concurrent identical cache misses into one upstream
// query (what golang.org/x/sync/singleflight does, which is not in the
// module graph). The query runs in its own goroutine so that a caller
// whose context ends returns at once without failing the others. It is a
// plain goroutine: parked ones (the former internal/gopool) did not win
// beyond the spread on the DNS bench (bench/dns/gopool-ab.md).
type flightGroup struct {
	mu    sync.Mutex
	calls map[cacheKey]*flight
	// onJoin, when set (tests), is called when a caller joins a query
	// already in flight.
	onJoin func(cacheKey)
}

type flight struct {
	done chan struct{}
	res  fetchResult
}

type fetchResult struct {
	e     *entry
	stale bool
	err   error
}

// do runs fn once for every key in flight and hands its result to every
// caller. The second result reports whether the caller joined a flight
// started by another. A caller whose ctx can never end (Done nil) cannot
// return before fn anyway: when it starts the flight, fn runs in its own
// goroutine, without the hand-off to a runner and back (a cache miss of the
// DNS server: two thread wake-ups fewer on its latency).
func (g *flightGroup) do(ctx context.Context, k cacheKey, fn func() fetchResult) (fetchResult, bool) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[cacheKey]*flight)
	}
	if f, ok := g.calls[k]; ok {
		g.mu.Unlock()
		if g.onJoin != nil {
			g.onJoin(k)
		}
		return g.wait(ctx, f), true
	}
	f := &flight{done: make(chan struct{})}
	g.calls[k] = f
	g.mu.Unlock()
	run := func() {
		f.res = fn()
		g.mu.Lock()
		delete(g.calls, k)
		g.mu.Unlock()
		close(f.done)
	}
	if ctx.Done() == nil {
		run()
		return f.res, false
	}
	go run()
	return g.wait(ctx, f), false
}

func (g *flightGroup) wait(ctx context.Context, f *flight) fetchResult {
	select {
	case <-f.done: // done already: nothing to wait for
		return f.res
	default:
	}
	beforeWait(ctx)
	select {
	case <-f.done:
		return f.res
	case <-ctx.Done():
		return fetchResult{err: ctx.Err()}
	}
}
