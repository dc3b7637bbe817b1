package audit

import (
	"bytes"
	"fmt"
	"io"
)

// sink is a file writer's queue: records wait in cur until a batch is due,
// then the sink's goroutine moves them to out and writes out with one
// write(2) per batch, outside the Logger's mutex, so that a request never
// waits for a disk or a pipe. A failed or short write keeps the unwritten
// bytes in out, from the exact byte where the file stopped, and retries
// after a backoff: the file ends with whole records once it recovers.
// Everything but w, reopen, name and wake is guarded by Logger.mu.
type sink struct {
	l      *Logger
	w      io.Writer
	reopen func() error // nil: nothing to reopen (stdout)
	name   string
	wake   chan struct{} // cap 1: there may be work for the goroutine

	cur      []byte // records queued since the last batch was taken
	out      []byte // the batch being written; out[outOff:] is unwritten
	outOff   int
	spare    []byte // a written batch's buffer, kept for the next cur
	queued   int64  // bytes ever queued
	written  int64  // of those, bytes written
	running  bool   // the goroutine runs
	flushDue bool   // cur is to be written even though it is not full
	armed    bool   // the flush timer runs

	retryWait bool  // after a failed write, until the backoff has passed
	retryGen  int64 // the retry timer that may end retryWait
	failures  int   // consecutive failed writes
	attempts  int64 // failed writes ever
	lastErr   error // of the last write; nil after a success
	inWrite   bool
	writeSeq  int64 // the write the stall watchdog watches
	stalled   bool  // the current write has hung for StallTimeout
	healthy   bool

	reopenReq  bool
	reopenGen  int64 // reopens asked for
	reopenDone int64 // reopens done
	reopenErr  error

	gap gapState // what it dropped since its last gap record (gap.go)
}

func newSink(l *Logger, w io.Writer, reopen func() error) *sink {
	name := fmt.Sprintf("%T", w)
	if n, ok := w.(interface{ Name() string }); ok {
		name = n.Name()
	}
	return &sink{l: l, w: w, reopen: reopen, name: name, wake: make(chan struct{}, 1), healthy: true}
}

func (s *sink) backlogLocked() int { return len(s.cur) + len(s.out) - s.outOff }

// unwrittenLocked counts the records not yet written whole.
func (s *sink) unwrittenLocked() int {
	return bytes.Count(s.out[s.outOff:], []byte{'\n'}) + bytes.Count(s.cur, []byte{'\n'})
}

// enqueueLocked queues one record (a whole line) and reports whether it fit.
func (s *sink) enqueueLocked(line []byte, refusal bool) bool {
	l := s.l
	limit := l.cfg.BufferLimit
	if refusal {
		limit /= 2
	}
	if s.backlogLocked()+len(line) > limit {
		return false
	}
	s.cur = append(s.cur, line...)
	s.queued += int64(len(line))
	s.ensureRunningLocked()
	switch {
	case len(s.cur) >= l.cfg.BufferSize || l.closed:
		s.kickLocked()
	case !s.armed:
		s.armed = true
		l.cfg.AfterFunc(l.cfg.FlushInterval, func() {
			l.mu.Lock()
			s.armed = false
			if len(s.cur) > 0 { // else the batch went out full, and the next one starts its own wait
				s.flushDue = true
				s.kickLocked()
			}
			l.mu.Unlock()
		})
	}
	return true
}

func (s *sink) kickLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sink) ensureRunningLocked() {
	if !s.running {
		s.running = true
		go s.run()
	}
}

// updateHealthLocked: a sink takes records unless its writes failed Retries
// times in a row, a write hangs, or its backlog reached a quarter of the
// limit; it takes them again once writes succeed and the backlog is below
// an eighth (hysteresis, so that a sink at the threshold does not flap).
func (s *sink) updateHealthLocked() bool {
	cfg := &s.l.cfg
	bad := s.failures >= cfg.Retries || s.stalled
	if s.healthy {
		s.healthy = !bad && s.backlogLocked() < cfg.BufferLimit/4
	} else {
		s.healthy = !bad && s.backlogLocked() <= cfg.BufferLimit/8
	}
	return s.healthy
}

// dueLocked reports whether the goroutine has something to do now.
func (s *sink) dueLocked() bool {
	switch {
	case s.reopenReq:
		return true
	case s.retryWait:
		return false
	case s.outOff < len(s.out):
		return true
	}
	return len(s.cur) > 0 && (s.flushDue || s.l.closed || len(s.cur) >= s.l.cfg.BufferSize)
}

// takeLocked returns the next chunk to write: whole records, at most two
// batches' worth (one write(2) for a normal batch; a backlog goes in
// pieces, which also keeps every write under a rotating file's size).
func (s *sink) takeLocked() []byte {
	if s.outOff == len(s.out) {
		s.out, s.cur, s.spare, s.outOff = s.cur, s.spare, nil, 0
		if s.cur == nil { // sized for a batch and its last record: no regrowth
			s.cur = make([]byte, 0, s.l.cfg.BufferSize+s.l.cfg.BufferSize/4)
		}
		s.flushDue = false
	}
	rest := s.out[s.outOff:]
	if limit := 2 * s.l.cfg.BufferSize; len(rest) > limit {
		if i := bytes.LastIndexByte(rest[:limit], '\n'); i >= 0 {
			rest = rest[:i+1]
		} else if j := bytes.IndexByte(rest[limit:], '\n'); j >= 0 { // one record longer than the limit
			rest = rest[:limit+j+1]
		}
	}
	return rest
}

// advanceLocked marks n more bytes of out written.
func (s *sink) advanceLocked(n int) {
	s.outOff += n
	s.written += int64(n)
	if s.outOff == len(s.out) {
		if cap(s.out) <= max(8*s.l.cfg.BufferSize, s.l.cfg.BufferLimit/8) && s.spare == nil {
			s.spare = s.out[:0]
		}
		s.out, s.outOff = nil, 0
	}
}

// run is the sink's goroutine: it writes batches as they fall due, retries
// failed writes, performs reopens, and exits once the Logger is closed and
// nothing is left (a Write after Close starts it again).
func (s *sink) run() {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if !s.dueLocked() {
			if l.closed && !s.retryWait && s.backlogLocked() == 0 {
				s.running = false
				return
			}
			l.mu.Unlock()
			<-s.wake
			l.mu.Lock()
			continue
		}
		if s.reopenReq {
			s.reopenLocked()
			continue
		}
		chunk := s.takeLocked()
		accepted := l.countAcceptedLocked()
		s.inWrite = true
		s.writeSeq++
		stopWatch := s.watchLocked()
		l.mu.Unlock()
		if accepted > 0 {
			l.cfg.Metrics.AuditWritten.Add(float64(accepted))
		}
		n, err := s.w.Write(chunk)
		if err == nil && n < len(chunk) {
			err = io.ErrShortWrite
		}
		stopWatch()
		l.mu.Lock()
		s.inWrite, s.stalled = false, false
		s.advanceLocked(n)
		if err != nil {
			s.failLocked(err)
		} else {
			s.failures, s.lastErr = 0, nil
		}
		changed := l.updateHealthLocked()
		if err == nil && s.gap.lines > 0 && s.healthy && !l.closed {
			l.writeGapLocked(s) // it takes records again
		}
		l.progress.Broadcast()
		if changed {
			l.mu.Unlock()
			l.notify()
			l.mu.Lock()
		}
	}
}

// failLocked counts a failed write and schedules the retry.
func (s *sink) failLocked(err error) {
	l := s.l
	s.failures++
	s.attempts++
	s.lastErr = err
	l.cfg.Metrics.AuditFailed.Inc()
	backoff := l.cfg.RetryBackoff
	for i := 1; i < s.failures && backoff < l.cfg.MaxRetryBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, l.cfg.MaxRetryBackoff)
	s.retryWait = true
	s.retryGen++
	gen := s.retryGen
	l.cfg.AfterFunc(backoff, func() {
		l.mu.Lock()
		if s.retryGen == gen {
			s.retryWait = false
			s.kickLocked()
		}
		l.mu.Unlock()
	})
}

// watchLocked starts the stall watchdog of the write about to begin.
func (s *sink) watchLocked() (stop func() bool) {
	l := s.l
	if l.cfg.StallTimeout < 0 {
		return func() bool { return false }
	}
	seq := s.writeSeq
	return l.cfg.AfterFunc(l.cfg.StallTimeout, func() {
		l.mu.Lock()
		changed := false
		if s.inWrite && s.writeSeq == seq && !s.stalled {
			s.stalled = true
			changed = l.updateHealthLocked()
		}
		l.mu.Unlock()
		if changed {
			l.notify()
		}
	})
}

// reopenLocked reopens the file between two records. A record that a short
// write cut is finished in the old file first; if that fails it goes whole
// to the new file (the old one keeps a fragment, never a split record).
func (s *sink) reopenLocked() {
	l := s.l
	s.reopenReq = false
	gen := s.reopenGen
	var rest []byte
	if s.outOff > 0 && s.outOff < len(s.out) && s.out[s.outOff-1] != '\n' {
		rest = s.out[s.outOff:]
		rest = rest[:bytes.IndexByte(rest, '\n')+1]
	}
	if rest != nil {
		l.mu.Unlock()
		n, err := s.w.Write(rest)
		l.mu.Lock()
		s.advanceLocked(n)
		if err != nil || n < len(rest) {
			start := bytes.LastIndexByte(s.out[:s.outOff], '\n') + 1
			s.written -= int64(s.outOff - start)
			s.outOff = start
		}
	}
	l.mu.Unlock()
	err := s.reopen()
	l.mu.Lock()
	s.reopenDone, s.reopenErr = gen, err
	// Try the new file at once: a reopen is also how an operator says the
	// disk has been fixed.
	s.retryWait = false
	s.retryGen++
	l.progress.Broadcast()
}
