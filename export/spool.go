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
// counter, so that lexical order is age order.
const segSuffix = ".seg"

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
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		seq, err := strconv.ParseUint(name, 10, 64)
		if !ok || err != nil || !e.Type().IsRegular() {
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
		s.segs = append(s.segs, &segment{seq: seq, size: info.Size(), first: info.ModTime()})
		s.bytes += info.Size()
		s.next = max(s.next, seq+1)
	}
	slices.SortFunc(s.segs, func(a, b *segment) int { return cmp.Compare(a.seq, b.seq) })
	// A spool may hold more than max after a restart with a smaller
	// --audit-spool-max: nothing is thrown away; appends wait for room.
	return s, nil
}

func (s *spool) path(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", seq, segSuffix))
}

// append adds whole lines, all of them or none: ErrSpoolFull when they do
// not fit, or the file's error (the segment cut back to what it held).
func (s *spool) append(p []byte, now time.Time) (sealed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+int64(len(p)) > s.max {
		return false, ErrSpoolFull
	}
	if s.cur == nil {
		c := &segment{seq: s.next, first: now}
		if s.dir != "" {
			f, err := os.OpenFile(s.path(c.seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
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
	b, err := os.ReadFile(s.path(g.seq))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return b, nil
}

// remove drops the oldest sealed segment g, which the engine acknowledged.
func (s *spool) remove(g *segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 || s.segs[0] != g {
		return nil
	}
	s.segs = s.segs[1:]
	s.bytes -= g.size
	if s.dir != "" {
		if err := os.Remove(s.path(g.seq)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("spool: %w", err)
		}
	}
	return nil
}

// state is the spool's size in bytes and the time its oldest record was
// appended (zero when empty).
func (s *spool) state() (bytes int64, oldest time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.segs) > 0:
		oldest = s.segs[0].first
	case s.cur != nil:
		oldest = s.cur.first
	}
	return s.bytes, oldest
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
