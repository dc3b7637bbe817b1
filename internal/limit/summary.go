package limit

import (
	"net/netip"
	"sync"
	"time"
)

// Key is what one summary record stands for: a client, the kind of
// request (connect, http, sni, dns) and what limit refused it.
type Key struct {
	Src    netip.Addr
	Kind   string
	Reason string
}

// Summary counts refusals over a limit and hands them to Emit at most once
// per key and Interval, with the count, instead of one record per refused
// request. Create it with NewSummary; Close emits what is left.
type Summary struct {
	emit     func(k Key, count int64, first time.Time)
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	pending map[Key]*tally
	timer   *time.Timer
	closed  bool
}

type tally struct {
	n     int64
	first time.Time
}

// SummaryConfig configures a Summary.
type SummaryConfig struct {
	// Emit receives one summary per key and interval, from the Summary's
	// own goroutine (or from Close); required.
	Emit func(k Key, count int64, first time.Time)
	// Interval is how long refusals are gathered; zero means one second.
	Interval time.Duration
	// Now is the clock for first; nil means time.Now.
	Now func() time.Time
}

// NewSummary returns a Summary for cfg.
func NewSummary(cfg SummaryConfig) *Summary {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	s := &Summary{emit: cfg.Emit, interval: cfg.Interval, pending: map[Key]*tally{}}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s.now = now
	return s
}

// Add counts one refusal of k. The first refusal of an interval starts its
// timer; the summary is emitted when it fires.
func (s *Summary) Add(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.pending[k]
	if t == nil {
		t = &tally{first: s.now()}
		s.pending[k] = t
	}
	t.n++
	if s.closed {
		return // Close has flushed; Flush picks this up
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.interval, s.Flush)
	}
}

// Flush emits every pending summary now.
func (s *Summary) Flush() {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[Key]*tally{}
	s.timer = nil
	s.mu.Unlock()
	for k, t := range pending {
		s.emit(k, t.n, t.first)
	}
}

// Close stops the timer and emits what is pending; later Adds are kept
// until the next Flush.
func (s *Summary) Close() {
	s.mu.Lock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.Flush()
}
