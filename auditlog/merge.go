package auditlog

import (
	"hash/maphash"
	"slices"
	"strings"

	"github.com/egressd/egressd/record"
)

// Merger de-duplicates records by id and folds interim records into their
// end record (docs/design.md, "Audit record": exactly one end record per
// request; interim records share its id).
//
//   - An end record is passed on the first time its id is seen; later ones
//     (the same record read from two inputs: a replica's --audit-file and
//     its kubectl logs, or overlapping rotated files) are counted as
//     duplicates.
//   - An interim record is held until its end record arrives, which then
//     replaces it; interim records read after their end record are
//     dropped. An interim record whose end record never came is passed on
//     at Flush with Open set and the bytes of the latest interim record.
//
// Memory: the ids of end records are kept as 8-byte hashes in an
// open-addressing set (idSet), 8–16 bytes per distinct request, so that
// any order of inputs is merged exactly; held interim records are bounded
// by the requests that were open when the logs were written.
type Merger struct {
	stats *Stats
	emit  func(*Record)
	seed  maphash.Seed
	ends  idSet
	open  map[uint64]*Record
}

// NewMerger returns a Merger that passes records to emit and counts in
// stats.
func NewMerger(stats *Stats, emit func(*Record)) *Merger {
	return &Merger{stats: stats, emit: emit, seed: maphash.MakeSeed(), open: map[uint64]*Record{}}
}

// Add takes one record; r is not kept (interim records are copied).
func (m *Merger) Add(r *Record) {
	if len(r.ID) == 0 {
		// No id (not written by audit.Logger): nothing to merge it with.
		if r.Event != record.EventInterim {
			m.emit(r)
		}
		return
	}
	h := maphash.String(m.seed, r.ID)
	if r.Event == record.EventInterim {
		if m.ends.has(h) {
			m.stats.Interim++
			return
		}
		if prev, ok := m.open[h]; ok {
			m.stats.Interim++
			if !r.Time.After(prev.Time) {
				return
			}
		}
		c := *r // a decoded record's parts are never reused (Decoder)
		m.open[h] = &c
		return
	}
	if !m.ends.add(h) {
		m.stats.Duplicates++
		return
	}
	if _, ok := m.open[h]; ok {
		m.stats.Interim++
		delete(m.open, h)
	}
	m.emit(r)
}

// Flush passes on the interim records whose end record was not read, in
// order of their start, marked Open.
func (m *Merger) Flush() {
	open := make([]*Record, 0, len(m.open))
	for _, r := range m.open {
		open = append(open, r)
	}
	slices.SortFunc(open, func(a, b *Record) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, r := range open {
		r.Open = true
		m.stats.Open++
		m.emit(r)
	}
	clear(m.open)
}

// idSet is a set of 64-bit hashes with open addressing and linear probing;
// 0 stands for the hash 0 in slot terms (it is stored as 1).
type idSet struct {
	slots []uint64
	n     int
}

// add inserts h and reports whether it was new.
func (s *idSet) add(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return false
		case 0:
			s.slots[i] = h
			s.n++
			return true
		}
	}
}

func (s *idSet) has(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	size := 1 << 12
	if len(old) > 0 {
		size = 2 * len(old)
	}
	s.slots, s.n = make([]uint64, size), 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}
