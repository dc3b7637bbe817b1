package audit

import (
	"container/heap"
	"sync"
	"time"

	"github.com/egressd/egressd/record"
)

// openRequest is a request registered with Open.
type openRequest struct {
	id    string
	start time.Time
	snap  func() record.Record
	due   time.Time // of its next interim record
	idx   int       // in the heap; -1 once done

	// mu is held while its interim record is made and written, and done
	// takes it: once done returns, no interim record of this id follows.
	mu   sync.Mutex
	done bool
}

// openHeap orders the open requests by due time.
type openHeap []*openRequest

func (h openHeap) Len() int           { return len(h) }
func (h openHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h openHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *openHeap) Push(x any) {
	e := x.(*openRequest)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *openHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// interims is the schedule of interim records: one timer for the Logger,
// armed for the earliest due request (no goroutine or timer per request;
// Open, done and each interim record cost O(log n)).
type interims struct {
	mu     sync.Mutex
	h      openHeap
	stop   func() bool // the armed timer; nil when none
	at     time.Time   // when it fires
	closed bool
}

func noop() {}

// Open registers a running request for interim records (Config.Interim):
// while it is open, every interval from start, the Logger writes snap() as
// an interim record: Event "interim", ID id, Start start, Time now, and
// DurationMS the time since start unless snap set it. snap returns the
// record as it stands, bytes so far included; it is called from the
// Logger's timer goroutine, so it must read only what does not change or
// atomics (copy a record built before Open and fill the byte counts from
// atomic counters). id must be the id the end record will carry.
//
// done unregisters the request; call it before writing the end record.
// After done returns, no interim record for id is written (one being
// written waits for done), so the end record is always the last. done may
// be called more than once. Interim records are skipped while the file
// sinks cannot take records (see Available): the next one, or the end
// record, carries the totals.
func (l *Logger) Open(id string, start time.Time, snap func() record.Record) (done func()) {
	if l.cfg.Interim <= 0 || snap == nil || id == "" {
		return noop
	}
	now := l.cfg.Now()
	if start.IsZero() {
		start = now
	}
	e := &openRequest{id: id, start: start, snap: snap, due: start.Add(l.cfg.Interim)}
	im := &l.im
	im.mu.Lock()
	if im.closed {
		im.mu.Unlock()
		return noop
	}
	heap.Push(&im.h, e)
	if e.idx == 0 {
		l.armLocked(now)
	}
	im.mu.Unlock()
	return func() { l.done(e) }
}

func (l *Logger) done(e *openRequest) {
	l.im.mu.Lock()
	if e.idx >= 0 {
		heap.Remove(&l.im.h, e.idx)
	}
	l.im.mu.Unlock()
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
}

// armLocked arms the timer for the earliest due request, unless it is
// armed for that time or earlier; im.mu is held.
func (l *Logger) armLocked(now time.Time) {
	im := &l.im
	if len(im.h) == 0 || im.closed {
		return
	}
	due := im.h[0].due
	if im.stop != nil {
		if !im.at.After(due) {
			return
		}
		im.stop()
	}
	im.at = due
	im.stop = l.cfg.AfterFunc(max(due.Sub(now), 0), l.fireInterims)
}

// fireInterims writes the interim records that are due and re-arms.
func (l *Logger) fireInterims() {
	im := &l.im
	now := l.cfg.Now()
	im.mu.Lock()
	im.stop = nil
	if im.closed {
		im.mu.Unlock()
		return
	}
	var due []*openRequest
	for len(im.h) > 0 && !im.h[0].due.After(now) {
		e := im.h[0]
		e.due = e.due.Add(l.cfg.Interim)
		if !e.due.After(now) { // late (a suspended process): no burst of records
			e.due = now.Add(l.cfg.Interim)
		}
		heap.Fix(&im.h, 0)
		due = append(due, e)
	}
	im.mu.Unlock()

	if l.healthyNow.Load() {
		for _, e := range due {
			l.writeInterim(e, now)
		}
	}

	im.mu.Lock()
	l.armLocked(l.cfg.Now())
	im.mu.Unlock()
}

func (l *Logger) writeInterim(e *openRequest, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return
	}
	r := e.snap()
	r.ID, r.Start, r.Time, r.Event = e.id, e.start, now, record.EventInterim
	if r.DurationMS == 0 {
		r.DurationMS = float64(now.Sub(e.start)) / float64(time.Millisecond)
	}
	l.Write(&r)
}

// closeInterims stops the interim records (Close).
func (l *Logger) closeInterims() {
	im := &l.im
	im.mu.Lock()
	defer im.mu.Unlock()
	im.closed = true
	if im.stop != nil {
		im.stop()
		im.stop = nil
	}
}
