package audit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/egressd/egressd/metrics"
	"github.com/egressd/egressd/policy"
)

// Config configures a Logger.
type Config struct {
	// Writers receive one JSON line per record (stdout, the audit file).
	// Empty means records are counted and dropped.
	Writers []io.Writer
	// Metrics counts records written and failed; required.
	Metrics *metrics.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Logger writes audit records as JSON lines. It is safe for concurrent use;
// a record is written whole to every writer or counted as failed.
type Logger struct {
	mu  sync.Mutex
	cfg Config
	buf []byte
}

// New returns a Logger for cfg.
func New(cfg Config) *Logger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Logger{cfg: cfg}
}

// Write completes r (time, id) and writes it. It is the only way a record
// leaves the process; a failing writer is counted, never fatal.
func (l *Logger) Write(r *Record) {
	if r.Time.IsZero() {
		r.Time = l.cfg.Now()
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.DNS != nil && r.DNS.Answers == nil {
		r.DNS.Answers = []string{}
	}
	line, err := json.Marshal(r)
	if err != nil {
		l.cfg.Metrics.AuditFailed.Inc()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf[:0], line...), '\n')
	failed := false
	for _, w := range l.cfg.Writers {
		if _, err := w.Write(l.buf); err != nil {
			failed = true
		}
	}
	if failed {
		l.cfg.Metrics.AuditFailed.Inc()
		return
	}
	l.cfg.Metrics.AuditWritten.Inc()
}

// NewID returns a random 128-bit id in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ClientOf returns the record's client for a connection from ip, with the
// pod's identity when c is not nil.
func ClientOf(ip netip.Addr, c *policy.Client) Client {
	out := Client{IP: ip.Unmap().String()}
	if c != nil {
		out.Namespace, out.Pod, out.ServiceAccount = c.Namespace, c.Pod, c.ServiceAccount
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
