package audit

import (
	"encoding/json"
	"time"

	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/record"
)

// Gap records (docs/design.md, "Records in a log engine"): under
// --audit-failure open, a sink whose backlog is full drops records, counted
// in egressd_audit_dropped_total. So that the hole is also written down
// where the records are read (the log engine's copy above all), the sink
// keeps what it dropped (how many, since when, why, and the seq range of
// the signed ones) and, once it takes records again, the Logger writes a
// gap record to every writer. It is signed like any record, so `egressd
// verify` reads it and names the missing range it explains.

// gapState is what a sink dropped since its last gap record.
type gapState struct {
	lines       int64     // lines dropped (checkpoint records included)
	first, last int64     // seq range of the signed records among them; -1 none
	since       time.Time // the first drop
	cause       string    // why the sink could not take them
}

// gapRecord is a gap record's JSON line (before Seal).
type gapRecord struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Sink     string    `json:"sink"`
	Records  int64     `json:"records"`
	Since    time.Time `json:"since"`
	Cause    string    `json:"cause"`
	FirstSeq *int64    `json:"first_seq,omitempty"`
	LastSeq  *int64    `json:"last_seq,omitempty"`
}

// noteDropLocked adds one line the sink could not take (a whole line, with
// its newline) to its gap; mu is held.
func (s *sink) noteDropLocked(line []byte) {
	g := &s.gap
	if g.lines == 0 {
		g.first, g.last = -1, -1
		g.since = s.l.cfg.Now()
	}
	if g.lines == 0 || s.lastErr != nil || s.stalled { // a write error says more than a backlog
		g.cause = s.causeLocked()
	}
	g.lines++
	if s.l.cfg.Evidence == nil || len(line) == 0 {
		return
	}
	if _, seq, ok := evidence.RecordPosition(line[:len(line)-1]); ok {
		if g.first < 0 {
			g.first = int64(seq)
		}
		g.last = int64(seq)
	}
}

// causeLocked says in words why the sink does not take records: its last
// write error, a hung write, or a backlog it has not written yet.
func (s *sink) causeLocked() string {
	switch {
	case s.lastErr != nil:
		return s.lastErr.Error()
	case s.stalled:
		return "a write hung"
	}
	return "its backlog filled --audit-buffer"
}

// writeGapLocked writes the gap record of s to every writer and starts a
// new gap; mu is held. After the exit checkpoint nothing more can be
// signed, so Close writes pending gaps before it.
func (l *Logger) writeGapLocked(s *sink) {
	g := s.gap
	s.gap = gapState{}
	r := gapRecord{Time: l.cfg.Now(), Kind: record.KindGap, Sink: s.name, Records: g.lines, Since: g.since, Cause: g.cause}
	if g.first >= 0 {
		r.FirstSeq, r.LastSeq = &g.first, &g.last
	}
	line, err := json.Marshal(r)
	if err != nil { // a struct of strings, numbers and times: never
		l.cfg.Metrics.AuditFailed.Inc()
		return
	}
	if ev := l.cfg.Evidence; ev != nil {
		line = ev.Seal(line)
	}
	line = append(line, '\n')
	if lost, _ := l.queueLocked(line, false); lost > 0 {
		l.cfg.Metrics.AuditDropped.Add(float64(lost))
	}
}

// writeGapsLocked writes the pending gap records of every sink; mu is held.
func (l *Logger) writeGapsLocked() {
	for _, s := range l.sinks {
		if s.gap.lines > 0 {
			l.writeGapLocked(s)
		}
	}
}
