package resolver

import (
	"context"
	"slices"
	"sync"
	"time"
)

// flightGroup coalesces concurrent identical cache misses into one upstream
// query (what golang.org/x/sync/singleflight does, which is not in the
// module graph). The query runs in its own goroutine so that a caller
// whose context ends returns at once without failing the others.
//
// Those goroutines are kept, parked, for the next query (up to
// flightIdle, for flightIdleFor): a fresh goroutine grows its stack
// through the exchange's calls on every miss, which was a tenth of the
// CPU of a server whose every query is a miss (upstream TTL 0).
type flightGroup struct {
	mu    sync.Mutex
	calls map[cacheKey]*flight
	idle  []chan func() // parked runners
	// onJoin, when set (tests), is called when a caller joins a query
	// already in flight.
	onJoin func(cacheKey)
}

const (
	flightIdle    = 256
	flightIdleFor = 10 * time.Second
)

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
	inline := ctx.Done() == nil
	var wake chan func()
	if n := len(g.idle); n > 0 && !inline {
		wake = g.idle[n-1]
		g.idle[n-1] = nil
		g.idle = g.idle[:n-1]
	}
	g.mu.Unlock()
	run := func() {
		f.res = fn()
		g.mu.Lock()
		delete(g.calls, k)
		g.mu.Unlock()
		close(f.done)
	}
	switch {
	case inline:
		run()
		return f.res, false
	case wake != nil:
		wake <- run
	default:
		go g.runner(run)
	}
	return g.wait(ctx, f), false
}

// runner runs fn, then parks for the next flight; it ends when enough are
// parked already or after flightIdleFor without one.
func (g *flightGroup) runner(fn func()) {
	var wake chan func()
	var timer *time.Timer
	for {
		fn()
		g.mu.Lock()
		if len(g.idle) >= flightIdle {
			g.mu.Unlock()
			return
		}
		if wake == nil {
			wake = make(chan func(), 1)
			timer = time.NewTimer(flightIdleFor)
		} else {
			timer.Reset(flightIdleFor)
		}
		g.idle = append(g.idle, wake)
		g.mu.Unlock()
		select {
		case fn = <-wake:
			timer.Stop()
		case <-timer.C:
			g.mu.Lock()
			i := slices.Index(g.idle, wake)
			if i >= 0 {
				g.idle = slices.Delete(g.idle, i, i+1)
			}
			g.mu.Unlock()
			if i >= 0 {
				return
			}
			fn = <-wake // taken just as the timer fired: its flight is ours
		}
	}
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
