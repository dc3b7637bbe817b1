package resolver

import (
	"context"

	"golang.org/x/sync/singleflight"
)

// flightGroup coalesces concurrent identical cache misses into one upstream
// query: golang.org/x/sync/singleflight. The query runs in the flight's
// own goroutine (DoChan), so that a caller whose context ends returns at
// once without failing the others, and every caller, the one that started
// the flight as those that joined it, waits the same way: after its
// before-wait func (WithBeforeWait), which is why the question's own
// goroutine never carries one.
type flightGroup struct {
	g singleflight.Group
	// onCall, when set (tests), is called once a caller has started or
	// joined the flight of k, before it waits.
	onCall func(cacheKey)
}

type fetchResult struct {
	e     *entry
	stale bool
	err   error
}

// do runs fn once for every key in flight and hands its result to every
// caller.
func (g *flightGroup) do(ctx context.Context, k cacheKey, fn func() fetchResult) fetchResult {
	ch := g.g.DoChan(k.flightKey(), func() (any, error) {
		res := fn()
		return &res, nil
	})
	if g.onCall != nil {
		g.onCall(k)
	}
	select {
	case r := <-ch: // done already: nothing to wait for
		return *r.Val.(*fetchResult)
	default:
	}
	beforeWait(ctx)
	select {
	case r := <-ch:
		return *r.Val.(*fetchResult)
	case <-ctx.Done():
		return fetchResult{err: ctx.Err()}
	}
}

// flightKey is k as singleflight's key: the name (a fully qualified name,
// so it ends in a dot) followed by type and class in two bytes each.
func (k cacheKey) flightKey() string {
	b := make([]byte, 0, len(k.name)+4)
	b = append(b, k.name...)
	b = append(b, byte(k.qtype>>8), byte(k.qtype), byte(k.qclass>>8), byte(k.qclass))
	return string(b)
}
