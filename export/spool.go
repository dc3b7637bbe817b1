package export

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// segSuffix names the spool's segment files: seq.seg, seq a zero-padded
// counter, so that lexical order is age order; ackSuffix an acknowledged
// segment kept for the resend window.
const (
	segSuffix = ".seg"
	ackSuffix = ".acked"
)

// spool holds what the engine has not acknowledged: segments of whole
// record lines, appended in order, sent and removed oldest first. With a
// directory each segment is a file, so that a restart (even after SIGKILL)
// finds them; without, they live in memory. A segment is sealed (no longer
// appended to) once it reaches segMax bytes or the sender finds it idle.
type spool struct {
	dir    string
	max    int64
	segMax int64

	mu    sync.Mutex
	segs  []*segment // sealed, oldest first
	acked []*segment // acknowledged within the resend window, oldest first
	cur   *segment   // being appended to; nil when none
	bytes int64      // of every segment, cur included
	next  uint64     // seq of the next segment
}

type segment struct {
	seq   uint64
	f     *os.File // the open file of cur (with a directory)
	data  []byte   // the records (without a directory)
	size  int64
	first time.Time // when its first record was appended
	acked time.Time // when the engine acknowledged it
}

// openSpool opens (creating it) the spool directory and takes every
// segment found there as sealed: what a previous process had not sent.
func openSpool(dir string, limit, segMax int64) (*spool, error) {
	s := &spool{dir: dir, max: limit, segMax: segMax}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: --audit-spool: %w", ErrConfig, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: --audit-spool: %w", ErrConfig, err)
	}
	for _, e := range ents {
		name, isSeg := strings.CutSuffix(e.Name(), segSuffix)
		name, isAck := strings.CutSuffix(name, ackSuffix)
		seq, err := strconv.ParseUint(name, 10, 64)
		if !isSeg || err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("%w: --audit-spool: %w", ErrConfig, err)
		}
		if info.Size() == 0 {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		g := &segment{seq: seq, size: info.Size(), first: info.ModTime()}
		if isAck {
			g.acked = info.ModTime()
			s.acked = append(s.acked, g)
		} else {
			s.segs = append(s.segs, g)
		}
		s.bytes += info.Size()
		s.next = max(s.next, seq+1)
	}
	bySeq := func(a, b *segment) int { return cmp.Compare(a.seq, b.seq) }
	slices.SortFunc(s.segs, bySeq)
	slices.SortFunc(s.acked, bySeq)
	// A spool may hold more than max after a restart with a smaller
	// --audit-spool-max: nothing is thrown away; appends wait for room.
	return s, nil
}

func (s *spool) path(g *segment) string {
	if !g.acked.IsZero() {
		return filepath.Join(s.dir, fmt.Sprintf("%020d%s%s", g.seq, ackSuffix, segSuffix))
	}
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", g.seq, segSuffix))
}

// append adds whole lines, all of them or none: ErrSpoolFull when they do
// not fit, or the file's error (the segment cut back to what it held).
func (s *spool) append(p []byte, now time.Time) (sealed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Acknowledged segments are insurance only: they make room first.
	for s.bytes+int64(len(p)) > s.max && len(s.acked) > 0 {
		s.dropAckedLocked()
	}
	if s.bytes+int64(len(p)) > s.max {
		return false, ErrSpoolFull
	}
	if s.cur == nil {
		c := &segment{seq: s.next, first: now}
		if s.dir != "" {
			f, err := os.OpenFile(s.path(c), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return false, fmt.Errorf("spool: %w", err)
			}
			c.f = f
		}
		s.next++
		s.cur = c
	}
	c := s.cur
	if c.f != nil {
		if _, err := c.f.Write(p); err != nil {
			_ = c.f.Truncate(c.size) // whole records or none
			return false, fmt.Errorf("spool: %w", err)
		}
	} else {
		c.data = append(c.data, p...)
	}
	c.size += int64(len(p))
	s.bytes += int64(len(p))
	if c.size >= s.segMax {
		s.sealLocked()
		return true, nil
	}
	return false, nil
}

func (s *spool) sealLocked() {
	c := s.cur
	if c == nil {
		return
	}
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
	s.segs = append(s.segs, c)
	s.cur = nil
}

// oldest returns the oldest sealed segment; with seal, the segment being
// appended to is sealed first when there is no other.
func (s *spool) oldest(seal bool) *segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 && seal && s.cur != nil && s.cur.size > 0 {
		s.sealLocked()
	}
	if len(s.segs) == 0 {
		return nil
	}
	return s.segs[0]
}

// read returns a sealed segment's records.
func (s *spool) read(g *segment) ([]byte, error) {
	if s.dir == "" {
		return g.data, nil
	}
	b, err := os.ReadFile(s.path(g))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return b, nil
}

// ack marks the oldest sealed segment g acknowledged: it is kept (and
// counted in the spool's bytes) for the resend window, since an engine
// acknowledges before its data is safe on disk (VictoriaLogs saves its
// in-memory data every -inmemoryDataFlushInterval, 5 s: a SIGKILL loses
// what it acknowledged since). window zero removes it at once.
func (s *spool) ack(g *segment, now time.Time, window time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 || s.segs[0] != g {
		return nil
	}
	s.segs = s.segs[1:]
	if window <= 0 {
		s.bytes -= g.size
		if s.dir != "" {
			if err := os.Remove(s.path(g)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("spool: %w", err)
			}
		}
		g.data = nil
		return nil
	}
	if s.dir != "" {
		from := s.path(g)
		g.acked = now
		if err := os.Rename(from, s.path(g)); err != nil {
			g.acked = time.Time{}
			s.bytes -= g.size
			_ = os.Remove(from)
			return fmt.Errorf("spool: %w", err)
		}
	}
	g.acked = now
	s.acked = append(s.acked, g)
	return nil
}

// expire removes the acknowledged segments older than window.
func (s *spool) expire(now time.Time, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.acked) > 0 && now.Sub(s.acked[0].acked) >= window {
		s.dropAckedLocked()
	}
}

func (s *spool) dropAckedLocked() {
	g := s.acked[0]
	s.acked = s.acked[1:]
	s.bytes -= g.size
	g.data = nil
	if s.dir != "" {
		_ = os.Remove(s.path(g))
	}
}

// resend puts the segments acknowledged within the resend window back in
// front of the queue: the engine failed after acknowledging them and may
// have lost them. It returns how many.
func (s *spool) resend() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.acked)
	if n == 0 {
		return 0
	}
	back := make([]*segment, 0, n+len(s.segs))
	for _, g := range s.acked {
		if s.dir != "" {
			from := s.path(g)
			g.acked = time.Time{}
			if err := os.Rename(from, s.path(g)); err != nil {
				s.bytes -= g.size
				_ = os.Remove(from)
				continue
			}
		}
		g.acked = time.Time{}
		back = append(back, g)
	}
	s.segs = append(back, s.segs...)
	s.acked = nil
	return len(back)
}

// state is the spool's size in bytes and the time its oldest record was
// appended (zero when empty).
func (s *spool) state() (bytes int64, oldest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bytes = s.bytes
	for _, g := range s.acked {
		bytes -= g.size
	}
	switch {
	case len(s.segs) > 0:
		oldest = s.segs[0].first
	case s.cur != nil:
		oldest = s.cur.first
	}
	return bytes, oldest
}

// close closes the file being appended to; what it holds stays for the
// next start.
func (s *spool) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.f != nil {
		_ = s.cur.f.Close()
		s.cur.f = nil
	}
}

// records counts the records in the spool (memory spools only: Close
// counts what it loses).
func (s *spool) records() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.segs {
		n += bytes.Count(g.data, []byte{'\n'})
	}
	if s.cur != nil {
		n += bytes.Count(s.cur.data, []byte{'\n'})
	}
	return n
}
