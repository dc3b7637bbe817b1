package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// Defaults applied by New.
const (
	DefaultFlushInterval   = 50 * time.Millisecond
	DefaultBufferSize      = 64 << 10
	DefaultBufferLimit     = 16 << 20
	DefaultRetries         = 3
	DefaultRetryBackoff    = 50 * time.Millisecond
	DefaultMaxRetryBackoff = 2 * time.Second
	DefaultStallTimeout    = 5 * time.Second
	DefaultWaitTimeout     = 5 * time.Second
	// DefaultCheckpointInterval is Config.CheckpointInterval's zero value.
	DefaultCheckpointInterval = 10 * time.Second
)

// Failure is what the Logger does when a file sink cannot take records
// (--audit-failure).
type Failure string

// Failure modes.
const (
	// FailClosed (the default) turns Available false: new requests are
	// refused (reason audit-unavailable) until the sink takes records
	// again, so that no request goes unrecorded.
	FailClosed Failure = "closed"
	// FailOpen keeps serving; records that do not fit in the buffer are
	// dropped and counted (egressd_audit_dropped_total).
	FailOpen Failure = "open"
)

// ParseFailure parses an --audit-failure value.
func ParseFailure(s string) (Failure, error) {
	switch f := Failure(s); f {
	case FailClosed, FailOpen:
		return f, nil
	}
	return "", fmt.Errorf("%w: %q", ErrFailure, s)
}

// FileWriter is a writer that costs a system call per Write: a file or a
// pipe. The Logger writes to it in batches, from a goroutine of its own,
// through a bounded buffer with retries (see Config), so that a slow, full
// or hung file never blocks a request. *os.File (stdout) is treated as one
// with nothing to reopen; *File, the --audit-file writer, is one. Any other
// writer is an in-process sink and gets one Write per record, synchronously.
type FileWriter interface {
	io.Writer
	// Reopen closes the file and opens its path again (logrotate's create
	// and SIGHUP). The Logger calls it between two batches, never inside a
	// record.
	Reopen() error
}

// Config configures a Logger.
type Config struct {
	// Writers receive the records as JSON lines (stdout, the audit file).
	// Empty means records are counted and dropped.
	Writers []io.Writer
	// Metrics counts records written, failed and dropped, and shows whether
	// the sinks take records; required.
	Metrics *metrics.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AfterFunc runs f once d has passed and returns a function that stops
	// it, as time.AfterFunc does. It times the flush delay, the interim
	// records, the retry backoff, the stall watchdog and the waits of
	// Flush, Close and Reopen, so that tests drive them with a fake clock
	// (with Now). nil means time.AfterFunc.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)

	// FlushInterval is the longest a record waits in memory before a file
	// sink (a FileWriter or *os.File: stdout, the audit file) gets it: file
	// sinks get the records in batches, one write(2) for many records,
	// which is what lets the DNS server log every query. In-process writers
	// get one Write call per record, before Logger.Write returns, since
	// there is no syscall to save. Zero means DefaultFlushInterval;
	// negative means never batch: every writer gets one Write per record,
	// synchronously, with no buffer and no retry (a failed write loses the
	// record; benchmarks compare against it).
	FlushInterval time.Duration
	// BufferSize is the size in bytes at which a batch is written without
	// waiting for FlushInterval. Zero means DefaultBufferSize; it is capped
	// at BufferLimit/8 so that a batch being filled never looks like a
	// lagging sink.
	BufferSize int
	// BufferLimit is how many bytes of records each file sink may hold
	// unwritten (--audit-buffer): while its writes fail, hang or lag.
	// Zero means DefaultBufferLimit (16 MiB, about 30,000 records).
	// A sink whose backlog reaches a quarter of it counts as unable to take
	// records (see Available) until the backlog is below an eighth; refusal
	// records (reason audit-unavailable) are taken only into the first
	// half, so that the second half stays for the end records of requests
	// already admitted; a record that does not fit is dropped and counted.
	BufferLimit int
	// Failure is what happens while a file sink cannot take records; the
	// zero value means FailClosed.
	Failure Failure
	// Retries is how many consecutive failed writes make a sink unable to
	// take records; it keeps retrying after that, and recovers at the first
	// write that succeeds. Zero means DefaultRetries.
	Retries int
	// RetryBackoff is the wait after the first failed write; it doubles
	// after each failure up to MaxRetryBackoff. Zero means
	// DefaultRetryBackoff and DefaultMaxRetryBackoff.
	RetryBackoff, MaxRetryBackoff time.Duration
	// StallTimeout is how long one write may hang (an NFS server gone, a
	// stdout reader that stopped reading) before the sink counts as unable
	// to take records. Zero means DefaultStallTimeout; negative never.
	StallTimeout time.Duration
	// WaitTimeout bounds how long Flush, Close, Reopen and a Write after
	// Close wait for a sink. Zero means DefaultWaitTimeout.
	WaitTimeout time.Duration

	// Interim is the interval of interim records for requests registered
	// with Open (--audit-interim): a request still open that long after its
	// start gets one, and again every interval. Zero means never.
	Interim time.Duration
	// OnRecord, when set, is called with every record the Logger encodes
	// (end and interim records), synchronously in Write after the record is
	// queued. It must be cheap and must not call the Logger; r must not be
	// kept.
	OnRecord func(r *record.Record)
	// Evidence, when set (--audit-signing-key), makes every record a leaf
	// of this process's verifiable log (checkpoint.go); nil means plain
	// records.
	Evidence *evidence.Log
	// CheckpointInterval is how often a checkpoint record is written when
	// records were sealed since the last one (--audit-checkpoint-interval).
	// Zero means DefaultCheckpointInterval; it applies only with Evidence.
	CheckpointInterval time.Duration
	// OnSinkState, when set, is called when the file sinks turn unable to
	// take records (ok false; err is the last write error, nil for a hang
	// or a lag) and when they recover (ok true), for the operational log.
	// Calls are serialized; the last call gives the current state.
	OnSinkState func(ok bool, err error)
}

// Logger writes audit records as JSON lines. It is safe for concurrent use.
// A record is written whole to every writer, or counted as failed or
// dropped; never dropped silently. Write never blocks on a file sink: it
// queues the record for the sink's own goroutine. A Logger with file sinks
// must be closed at shutdown, after the last request has been logged: Close
// writes what is still buffered.
type Logger struct {
	cfg     Config
	scratch sync.Pool // *[]byte: a record being encoded
	copies  sync.Pool // *Record: what OnRecord gets
	direct  []io.Writer
	sinks   []*sink

	mu       sync.Mutex
	progress sync.Cond // a sink finished a write attempt or a reopen, or a wait timed out
	closed   bool
	accepted int  // records queued in every writer, not yet added to AuditWritten
	healthy  bool // every sink takes records

	healthyNow atomic.Bool // healthy, read without mu
	available  atomic.Bool // Available

	notifyMu sync.Mutex
	reported bool // the state OnSinkState last reported

	outcomes outcomes // egressd_outcomes_total (outcome.go)

	im interims

	stopCheckpoints func() bool // the checkpoint timer; nil without Evidence
}

// New returns a Logger for cfg.
func New(cfg Config) *Logger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.BufferLimit <= 0 {
		cfg.BufferLimit = DefaultBufferLimit
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	cfg.BufferSize = max(1, min(cfg.BufferSize, cfg.BufferLimit/8))
	if cfg.Failure != FailOpen {
		cfg.Failure = FailClosed
	}
	if cfg.Retries <= 0 {
		cfg.Retries = DefaultRetries
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = max(DefaultMaxRetryBackoff, cfg.RetryBackoff)
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = DefaultWaitTimeout
	}
	l := &Logger{cfg: cfg, healthy: true, reported: true}
	l.outcomes = newOutcomes(cfg.Metrics)
	l.progress.L = &l.mu
	l.scratch.New = func() any { b := make([]byte, 0, 1024); return &b }
	l.copies.New = func() any { return new(record.Record) }
	for _, w := range cfg.Writers {
		if cfg.FlushInterval < 0 {
			l.direct = append(l.direct, w)
			continue
		}
		switch fw := w.(type) {
		case FileWriter:
			l.sinks = append(l.sinks, newSink(l, w, fw.Reopen))
		case *os.File:
			l.sinks = append(l.sinks, newSink(l, w, nil))
		default:
			l.direct = append(l.direct, w)
		}
	}
	l.healthyNow.Store(true)
	l.available.Store(true)
	cfg.Metrics.AuditAvailable.Set(1)
	if cfg.Evidence != nil {
		if l.cfg.CheckpointInterval <= 0 {
			l.cfg.CheckpointInterval = DefaultCheckpointInterval
		}
		l.armCheckpoint()
	}
	return l
}

// Available reports whether a new request may be served: false while a file
// sink cannot take records (writes failing Config.Retries times in a row, a
// write hung for StallTimeout, or a backlog over a quarter of BufferLimit)
// and Failure is FailClosed. Callers refuse the request with reason
// audit-unavailable (503 on the proxy) and record the refusal. It is one
// atomic load: call it per request.
func (l *Logger) Available() bool { return l.available.Load() }

// Write completes r (time, start, event, id) and writes it. It is the only
// way a record leaves the process; a failing writer is counted, never
// fatal. Write queues the record for the file sinks and returns without
// waiting for them, except after Close: then it waits (at most WaitTimeout)
// until the record is written, so that a record logged during shutdown (a
// tunnel cut at the drain deadline) is not lost when the process exits.
func (l *Logger) Write(r *record.Record) {
	l.complete(r)
	bp := l.scratch.Get().(*[]byte)
	line, err := record.AppendJSON((*bp)[:0], r)
	if err != nil {
		l.cfg.Metrics.AuditFailed.Inc()
		l.cfg.Metrics.AuditDropped.Inc()
		l.scratch.Put(bp)
		return
	}
	// Refusals because records cannot be written must not crowd out the
	// end records of requests already admitted.
	refusal := r.Reason == string(policy.ReasonAuditUnavailable)

	l.mu.Lock()
	if ev := l.cfg.Evidence; ev != nil {
		line = ev.Seal(line)
	}
	line = append(line, '\n')
	lost, counted := l.queueLocked(line, refusal)
	if l.closed && l.cfg.Evidence != nil {
		// A record after Close (a tunnel cut at the drain deadline) gets
		// its own exit checkpoint: the log still ends with one.
		_ = l.checkpointLocked(evidence.TriggerExit)
	}
	changed := l.updateHealthLocked()
	if l.closed && l.healthy {
		_ = l.drainLocked(true) // a failure is counted by the sink; the caller has no use for it
	}
	l.mu.Unlock()

	if counted > 0 {
		l.cfg.Metrics.AuditWritten.Inc()
	}
	if lost > 0 {
		l.cfg.Metrics.AuditDropped.Add(float64(lost))
	}
	if changed {
		l.notify()
	}
	if l.cfg.OnRecord != nil {
		// A copy from a pool: handing r itself to a function value would
		// make every caller's record escape to the heap, callback or not.
		c := l.copies.Get().(*record.Record)
		*c = *r
		l.cfg.OnRecord(c)
		*c = record.Record{}
		l.copies.Put(c)
	}
	if cap(line) <= 64<<10 { // a huge record's buffer is not kept
		*bp = line
		l.scratch.Put(bp)
	}
}

// queueLocked hands one line to every writer and reports how many lost it
// and whether it is counted written now (no file sink); mu is held.
func (l *Logger) queueLocked(line []byte, refusal bool) (lost, counted int) {
	for _, w := range l.direct {
		if _, err := w.Write(line); err != nil {
			l.cfg.Metrics.AuditFailed.Inc()
			lost++
		}
	}
	for _, s := range l.sinks {
		if !s.enqueueLocked(line, refusal) {
			lost++
			s.noteDropLocked(line)
		}
	}
	if lost == 0 {
		if len(l.sinks) == 0 {
			counted = 1
		} else {
			l.accepted++ // added to the counter when a sink takes its batch
		}
	}
	return lost, counted
}

// updateHealthLocked recomputes whether every sink takes records and
// reports whether that changed; mu is held.
func (l *Logger) updateHealthLocked() bool {
	ok := true
	for _, s := range l.sinks {
		if !s.updateHealthLocked() {
			ok = false
		}
	}
	if ok == l.healthy {
		return false
	}
	l.healthy = ok
	l.healthyNow.Store(ok)
	l.available.Store(ok || l.cfg.Failure == FailOpen)
	if ok {
		l.cfg.Metrics.AuditAvailable.Set(1)
	} else {
		l.cfg.Metrics.AuditAvailable.Set(0)
	}
	return true
}

// notify reports the current sink state to OnSinkState if it differs from
// the last report. It runs without mu: the callback may log, or call
// Available.
func (l *Logger) notify() {
	if l.cfg.OnSinkState == nil {
		return
	}
	l.notifyMu.Lock()
	defer l.notifyMu.Unlock()
	l.mu.Lock()
	ok := l.healthy
	var err error
	for _, s := range l.sinks {
		if s.lastErr != nil {
			err = fmt.Errorf("audit: write %s: %w", s.name, s.lastErr)
		}
	}
	l.mu.Unlock()
	if ok == l.reported {
		return
	}
	l.reported = ok
	l.cfg.OnSinkState(ok, err)
}

// countAcceptedLocked takes the records accepted since the last call, for
// AuditWritten; mu is held.
func (l *Logger) countAcceptedLocked() int {
	n := l.accepted
	l.accepted = 0
	return n
}

// drainLocked waits until every sink has written what it held when called,
// or WaitTimeout passes. With stopOnError it returns at a sink's first
// failed write after the call (Flush); without, it waits through the
// retries (Close). mu is held, and released while waiting.
func (l *Logger) drainLocked(stopOnError bool) error {
	if len(l.sinks) == 0 {
		return nil
	}
	type mark struct{ queued, attempts int64 }
	marks := make([]mark, len(l.sinks))
	for i, s := range l.sinks {
		marks[i] = mark{s.queued, s.attempts}
		if s.written < s.queued {
			s.flushDue = true
			s.ensureRunningLocked()
			s.kickLocked()
		}
	}
	timedOut := false
	stop := l.cfg.AfterFunc(l.cfg.WaitTimeout, func() {
		l.mu.Lock()
		timedOut = true
		l.progress.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	for {
		var errs []error
		pending := false
		for i, s := range l.sinks {
			if s.written >= marks[i].queued {
				continue
			}
			if stopOnError && s.attempts > marks[i].attempts && s.lastErr != nil {
				errs = append(errs, fmt.Errorf("audit: write %s: %w", s.name, s.lastErr))
				continue
			}
			pending = true
		}
		if !pending {
			return errors.Join(errs...)
		}
		if timedOut {
			return errors.Join(append(errs, ErrTimeout)...)
		}
		l.progress.Wait()
	}
}

// Flush writes the buffered records now and waits until they are written.
// It returns a sink's write error (the records stay buffered and are
// retried) or ErrTimeout after WaitTimeout. In-process writers are never
// buffered.
func (l *Logger) Flush() error {
	l.mu.Lock()
	err := l.drainLocked(true)
	n := l.countAcceptedLocked()
	l.mu.Unlock()
	l.cfg.Metrics.AuditWritten.Add(float64(n))
	return err
}

// Close stops the interim records, writes the buffered records and waits
// for them, through retries, for at most WaitTimeout. Records still
// unwritten then are counted dropped (a sink that recovers before the
// process exits still writes them) and Close returns ErrTimeout with the
// last write error. A later Write writes its record at once. Close closes
// none of the writers and may be called more than once; only the first
// call flushes.
func (l *Logger) Close() error {
	l.closeInterims()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true // before the wait, which releases mu: every later record is written at once
	if l.stopCheckpoints != nil {
		l.stopCheckpoints()
	}
	l.writeGapsLocked() // before the exit checkpoint: signed, and covered by it
	var cpErr error
	if l.cfg.Evidence != nil {
		cpErr = l.checkpointLocked(evidence.TriggerExit)
	}
	err := errors.Join(l.drainLocked(false), cpErr)
	lost := 0
	if err != nil {
		var last []error
		for _, s := range l.sinks {
			lost += s.unwrittenLocked()
			if s.lastErr != nil {
				last = append(last, fmt.Errorf("audit: write %s: %w", s.name, s.lastErr))
			}
		}
		err = errors.Join(append([]error{err}, last...)...)
	}
	n := l.countAcceptedLocked()
	l.mu.Unlock()
	l.cfg.Metrics.AuditWritten.Add(float64(n))
	l.cfg.Metrics.AuditDropped.Add(float64(lost))
	return err
}

// Reopen makes every file sink that has a path (a *File) close and open it
// again, between two batches: logrotate's create + postrotate SIGHUP. A
// record cut by a short write (a full disk) is finished in the old file, or
// written whole to the new one; none is split. It waits at most
// WaitTimeout (a hung write delays the reopen, which then still happens).
func (l *Logger) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	type mark struct {
		s   *sink
		gen int64
	}
	var marks []mark
	for _, s := range l.sinks {
		if s.reopen == nil {
			continue
		}
		s.reopenGen++
		s.reopenReq = true
		marks = append(marks, mark{s, s.reopenGen})
		s.ensureRunningLocked()
		s.kickLocked()
	}
	if len(marks) == 0 {
		return nil
	}
	timedOut := false
	stop := l.cfg.AfterFunc(l.cfg.WaitTimeout, func() {
		l.mu.Lock()
		timedOut = true
		l.progress.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	var errs []error
	for _, m := range marks {
		for m.s.reopenDone < m.gen && !timedOut {
			l.progress.Wait()
		}
		switch {
		case m.s.reopenDone < m.gen:
			errs = append(errs, fmt.Errorf("audit: reopen %s: %w", m.s.name, ErrTimeout))
		case m.s.reopenErr != nil:
			errs = append(errs, fmt.Errorf("audit: reopen %s: %w", m.s.name, m.s.reopenErr))
		}
	}
	if l.cfg.Evidence != nil {
		// The reopened file starts with a checkpoint of what came before.
		errs = append(errs, l.checkpointLocked(evidence.TriggerRotation))
	}
	return errors.Join(errs...)
}

// NewID returns a random 128-bit id in hex. The bits come from
// math/rand/v2's runtime generator (ChaCha8, seeded by the kernel, per
// thread, no lock, no syscall): ids must be unique, not secret, and 128
// random bits make a collision among even 2^40 records a 2^-49 event.
func NewID() string {
	var b [16]byte
	u, v := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		b[i], b[8+i] = byte(u>>(8*i)), byte(v>>(8*i))
	}
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// ClientOf returns the record's client for a connection from ip, with the
// pod's identity when c is not nil.
func ClientOf(ip netip.Addr, c *policy.Client) record.Client {
	out := record.Client{IP: ip.Unmap().String()}
	if c != nil {
		out.Namespace, out.Pod, out.ServiceAccount = c.Namespace, c.Pod, c.ServiceAccount
		out.UID = c.UID
		if c.Workload.Kind != "" {
			out.Workload = &record.Workload{Kind: c.Workload.Kind, Name: c.Workload.Name}
		}
	}
	return out
}
