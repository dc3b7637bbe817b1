// Package gopool runs functions on goroutines that stay parked between
// them. A fresh goroutine starts with a small stack and grows it (a copy
// per doubling) through the calls of a network request; a parked one keeps
// what it grew, and handing it work costs a channel send instead of a
// goroutine start. The resolver runs its upstream queries on one and the
// DNS server its UDP workers. The proxy no longer does: on the peer bench
// plain go was as good (bench/peer/gopool-ab.md); the DNS paths are yet to
// be measured the same way (the build tag egressd_plaingo).
//
// It imports only the standard library (internal/archtest).
package gopool

import (
	"slices"
	"sync"
	"time"
)

// Pool hands functions to parked goroutines. At most Max park at a time;
// one parked for IdleFor without work ends. The zero value is not usable:
// use New.
type Pool struct {
	max     int
	idleFor time.Duration

	mu      sync.Mutex
	idle    []chan func() // parked goroutines, the latest last
	stopped bool
}

// New returns a Pool that keeps at most max goroutines parked, each for at
// most idleFor.
func New(max int, idleFor time.Duration) *Pool {
	return &Pool{max: max, idleFor: idleFor}
}

// Go runs f on a parked goroutine, or on a new one when none is parked
// (always a new one in a build with the tag egressd_plaingo).
// After Stop, f still runs (on a new goroutine) and nothing parks after it.
func (p *Pool) Go(f func()) {
	if plainGo {
		go f()
		return
	}
	p.mu.Lock()
	var wake chan func()
	if n := len(p.idle); n > 0 {
		wake = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if wake != nil {
		wake <- f
		return
	}
	go p.run(f)
}

// run runs f, then parks for the next function; it ends when Max are
// parked already, after IdleFor without work, or when the pool stops.
func (p *Pool) run(f func()) {
	var wake chan func()
	var timer *time.Timer
	for f != nil {
		f()
		p.mu.Lock()
		if p.stopped || len(p.idle) >= p.max {
			p.mu.Unlock()
			return
		}
		if wake == nil {
			wake = make(chan func(), 1)
			timer = time.NewTimer(p.idleFor)
		} else {
			timer.Reset(p.idleFor)
		}
		p.idle = append(p.idle, wake)
		p.mu.Unlock()
		select {
		case f = <-wake:
			timer.Stop()
		case <-timer.C:
			p.mu.Lock()
			i := slices.Index(p.idle, wake)
			if i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return
			}
			f = <-wake // taken just as the timer fired: the work is ours
		}
	}
}

// Stop ends the parked goroutines; running ones end when their function
// returns. Go keeps working, without parking.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.stopped = true
	parked := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, wake := range parked {
		wake <- nil
	}
}

// Parked returns how many goroutines are parked now.
func (p *Pool) Parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
