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
	"time"

	"github.com/egressd/egressd/metrics"
	"github.com/egressd/egressd/policy"
)

// Defaults applied by New.
const (
	DefaultFlushInterval = 50 * time.Millisecond
	DefaultBufferSize    = 64 << 10
)

// Config configures a Logger.
type Config struct {
	// Writers receive the records as JSON lines (stdout, the audit file).
	// Empty means records are counted and dropped.
	Writers []io.Writer
	// Metrics counts records written and failed; required.
	Metrics *metrics.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// FlushInterval is the longest a record waits in memory before it is
	// written, when every writer is a file (*os.File: stdout, the audit
	// file): such writers get the records in batches, one write(2) for many
	// records, which is what lets the DNS server log every query. Any other
	// writer is an in-process sink and gets one Write call per record,
	// before Logger.Write returns, since there is no syscall to save. Zero
	// means DefaultFlushInterval; negative means never batch.
	FlushInterval time.Duration
	// BufferSize is the size in bytes at which a batch is written without
	// waiting for FlushInterval; while one batch is being written and the
	// next is full, Write blocks (memory stays bounded, nothing is dropped).
	// Zero means DefaultBufferSize.
	BufferSize int
}

// Logger writes audit records as JSON lines. It is safe for concurrent use.
// A record is written whole to every writer or counted as failed, never
// dropped silently. A batching Logger (see Config.FlushInterval) must be
// closed at shutdown, after the last request has been logged: Close writes
// what is still buffered.
type Logger struct {
	cfg     Config
	batched bool
	scratch sync.Pool // *[]byte: a record being encoded

	mu       sync.Mutex
	flushed  sync.Cond // signalled when a batch write ends
	cur      []byte    // records waiting to be written
	pending  int       // records in cur
	spare    []byte    // the other batch buffer, nil while it is being written
	flushing bool      // a batch is being written, outside mu
	closed   bool
	timer    *time.Timer // flushes cur FlushInterval after its first record
	armed    bool        // timer will fire
}

// New returns a Logger for cfg.
func New(cfg Config) *Logger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	l := &Logger{cfg: cfg, batched: cfg.FlushInterval > 0 && len(cfg.Writers) > 0}
	for _, w := range cfg.Writers {
		if _, ok := w.(*os.File); !ok {
			l.batched = false
		}
	}
	l.flushed.L = &l.mu
	l.scratch.New = func() any { b := make([]byte, 0, 1024); return &b }
	return l
}

// Write completes r (time, start, event, id) and writes it. It is the only way a record
// leaves the process; a failing writer is counted, never fatal. Write after
// Close writes the record at once, unbatched, so a record logged during
// shutdown (a tunnel cut at the drain deadline) is still not lost.
func (l *Logger) Write(r *Record) {
	if r.Time.IsZero() {
		r.Time = l.cfg.Now()
	}
	if r.Start.IsZero() {
		r.Start = r.Time
	}
	if r.Event == "" {
		r.Event = EventEnd
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.DNS != nil && r.DNS.Answers == nil {
		r.DNS.Answers = []string{}
	}
	bp := l.scratch.Get().(*[]byte)
	line, err := appendRecord((*bp)[:0], r)
	if err != nil {
		l.cfg.Metrics.AuditFailed.Inc()
		l.scratch.Put(bp)
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	if l.batched && !l.closed {
		l.enqueueLocked(line)
	} else {
		_ = l.writeLocked(line, 1) // counted in AuditFailed
	}
	l.mu.Unlock()
	if cap(line) <= 64<<10 { // a huge record's buffer is not kept
		*bp = line
		l.scratch.Put(bp)
	}
}

// enqueueLocked adds a line to the batch; mu is held.
func (l *Logger) enqueueLocked(line []byte) {
	// Backpressure: while one batch is written and the next is full, wait.
	for l.flushing && len(l.cur) >= l.cfg.BufferSize {
		l.flushed.Wait()
	}
	if l.closed { // closed while waiting
		_ = l.writeLocked(line, 1)
		return
	}
	l.cur = append(l.cur, line...)
	l.pending++
	switch {
	case len(l.cur) >= l.cfg.BufferSize && !l.flushing:
		_ = l.flushLocked()
	case !l.armed:
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.cfg.FlushInterval, l.timedFlush)
		} else {
			l.timer.Reset(l.cfg.FlushInterval)
		}
	}
}

func (l *Logger) timedFlush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	_ = l.flushLocked() // counted in AuditFailed
}

// flushLocked writes the batch. mu is held on entry and return, and
// released while the writers run, so that Write can fill the other buffer.
func (l *Logger) flushLocked() error {
	for l.flushing {
		l.flushed.Wait()
	}
	if len(l.cur) == 0 {
		return nil
	}
	buf, n := l.cur, l.pending
	l.cur, l.spare, l.pending = l.spare[:0], nil, 0
	l.flushing = true
	l.mu.Unlock()
	err := l.writeAll(buf, n)
	l.mu.Lock()
	l.flushing = false
	if cap(buf) <= 2*l.cfg.BufferSize {
		l.spare = buf[:0]
	}
	l.flushed.Broadcast()
	return err
}

// writeLocked writes n records in p at once, after any batch in flight so
// that records stay in order; mu is held.
func (l *Logger) writeLocked(p []byte, n int) error {
	for l.flushing {
		l.flushed.Wait()
	}
	return l.writeAll(p, n)
}

// writeAll writes p, n whole records, to every writer and counts them.
func (l *Logger) writeAll(p []byte, n int) error {
	var errs []error
	for _, w := range l.cfg.Writers {
		if _, err := w.Write(p); err != nil {
			errs = append(errs, err)
		}
	}
	if errs != nil {
		l.cfg.Metrics.AuditFailed.Add(float64(n))
		return fmt.Errorf("audit: write %d records: %w", n, errors.Join(errs...))
	}
	l.cfg.Metrics.AuditWritten.Add(float64(n))
	return nil
}

// Flush writes the buffered records now and returns the writers' error, if
// any (the records are then counted failed). Records written by an
// unbatched Logger are never buffered.
func (l *Logger) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

// Close flushes the buffered records and ends batching: a later Write
// writes its record at once. It closes none of the writers and may be
// called more than once; only the first call flushes.
func (l *Logger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true // before the flush, which releases mu: no record may slip into the batch after it
	if l.timer != nil {
		l.timer.Stop()
		l.armed = false
	}
	return l.flushLocked()
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
func ClientOf(ip netip.Addr, c *policy.Client) Client {
	out := Client{IP: ip.Unmap().String()}
	if c != nil {
		out.Namespace, out.Pod, out.ServiceAccount = c.Namespace, c.Pod, c.ServiceAccount
		out.UID = c.UID
		if c.Workload.Kind != "" {
			out.Workload = &Workload{Kind: c.Workload.Kind, Name: c.Workload.Name}
		}
	}
	return out
}

// SetDecision copies a decision into r.
func (r *Record) SetDecision(d policy.Decision) {
	r.Verdict = string(d.Verdict)
	r.WouldDeny = d.WouldDeny
	r.Reason = string(d.Reason)
	r.Policy, r.Purpose, r.Owner = d.Policy, d.Purpose, d.Owner
	r.Rule = nil
	if d.Policy != "" && d.Rule >= 0 {
		rule := d.Rule
		r.Rule = &rule
	}
}
