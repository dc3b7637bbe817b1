package testutil

import (
	"context"
	"time"
)

// Every calls f every d (the first time after d) until ctx ends: the steady
// request rate of a load generator.
func Every(ctx context.Context, d time.Duration, f func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}
