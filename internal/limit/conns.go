package limit

import (
	"net/netip"
	"sync"
)

// Conns counts the connections each source IP holds open. Without it one
// pod (or one unknown source: the identity check comes after accept) could
// open connections until egressd runs out of descriptors and memory, which
// denies every other pod. Safe for concurrent use.
type Conns struct {
	max int // <= 0: no limit

	mu   sync.Mutex
	open map[netip.Addr]int
}

// NewConns returns a cap of max open connections per source IP; max <= 0
// means no limit.
func NewConns(max int) *Conns {
	return &Conns{max: max, open: map[netip.Addr]int{}}
}

// Max returns the cap (<= 0: none).
func (l *Conns) Max() int { return l.max }

// Acquire takes a slot for src; it returns the release func (safe to call
// more than once) or nil when src is at its limit.
func (l *Conns) Acquire(src netip.Addr) func() {
	if l.max <= 0 {
		return func() {}
	}
	l.mu.Lock()
	if l.open[src] >= l.max {
		l.mu.Unlock()
		return nil
	}
	l.open[src]++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.open[src]--; l.open[src] <= 0 {
				delete(l.open, src)
			}
			l.mu.Unlock()
		})
	}
}

// Open returns the connections src holds now.
func (l *Conns) Open(src netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[src]
}
