package audit

import (
	"sort"
	"sync"
	"time"
)

// fakeClock is Config.Now and Config.AfterFunc under a test's control:
// time moves only in Advance, which runs the timers that fall due in the
// caller's goroutine, in order, so that when Advance returns their work
// (an interim record written to an in-process sink) is done.
type fakeClock struct {
	mu     sync.Mutex
	armed  sync.Cond // signalled when a timer is armed
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	c.armed.L = &c.mu
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.armed.Broadcast()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// pending counts the timers armed and not yet run or stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// waitArmed blocks until a timer due exactly d from now is armed (by
// another goroutine: a sink's stall watchdog).
func (c *fakeClock) waitArmed(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for _, t := range c.timers {
			if !t.stopped && t.at.Equal(c.now.Add(d)) {
				return
			}
		}
		c.armed.Wait()
	}
}

// Advance moves the clock by d, running every timer due by then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		live := c.timers[:0]
		for _, t := range c.timers {
			if !t.stopped {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.stopped = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}
