package credentials

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MaxValueBytes bounds a credential's value: a header value longer than
// this would not fit an origin's header limits (commonly 8–16 KiB) anyway.
const MaxValueBytes = 8 << 10

// Sentinels, matched with errors.Is.
var (
	// ErrDir marks a --credentials-dir that cannot be listed.
	ErrDir = errors.New("credentials: cannot read the credentials directory")
)

// Problems of one credential file (Report.Unavailable), in words, never
// with the value.
const (
	ProblemEmpty   = "empty"
	ProblemTooLong = "over 8192 bytes"
	ProblemControl = "holds a control character or a line break inside the value"
	ProblemRead    = "cannot be read"
)

// Store holds the credentials of one directory. Lookup is safe for
// concurrent use; Poll is called from one goroutine at a time.
type Store struct {
	dir  string
	snap atomic.Pointer[snapshot]
	// mu serializes writers of snap: Poll, and Lookup formatting a pair
	// its snapshot does not hold yet.
	mu sync.Mutex
}

// snapshot is one load of the directory; never modified once published.
type snapshot struct {
	values map[string]string // name → value; available credentials only
	// headers are the formatted header values of every (name, format)
	// asked so far, each a one-element slice of capacity 1 (so that an
	// append by a caller copies instead of writing into it).
	headers map[pair][]string
}

type pair struct{ name, format string }

// Report says what a load found: names only, never values.
type Report struct {
	// Available are the credentials that load, sorted.
	Available []string
	// Unavailable maps each file that does not load to its problem.
	Unavailable map[string]string
	// Changed are the credentials added, rotated (another value) or
	// gone since the previous load, sorted; every available one at the
	// first load.
	Changed []string
}

// Open reads dir once and returns its Store. A directory that cannot be
// listed is an error (a wrong --credentials-dir is a mistake to stop on);
// a file that does not load is only unavailable (Report).
func Open(dir string) (*Store, Report, error) {
	s := &Store{dir: dir}
	if _, err := os.ReadDir(dir); err != nil {
		return nil, Report{}, fmt.Errorf("%w %s: %w", ErrDir, dir, err)
	}
	rep, _ := s.Poll()
	return s, rep, nil
}

// Dir returns the directory the store reads.
func (s *Store) Dir() string { return s.dir }

// Poll reads the directory again and publishes what it holds when that
// differs from the snapshot in force; changed says it did. A directory
// that cannot be listed (deleted, unmounted) holds nothing: every
// credential is unavailable from then on.
func (s *Store) Poll() (Report, bool) {
	values, rep := read(s.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.snap.Load()
	if old != nil && maps.Equal(old.values, values) {
		return rep, false
	}
	next := &snapshot{values: values, headers: map[pair][]string{}}
	if old != nil {
		// Keep every pair asked so far formatted: the first request
		// after a rotation allocates nothing either.
		for p := range old.headers {
			if v, ok := values[p.name]; ok {
				next.headers[p] = header(p.format, v)
			}
		}
	}
	for name, v := range values {
		if old == nil || old.values[name] != v {
			rep.Changed = append(rep.Changed, name)
		}
	}
	if old != nil {
		for name := range old.values {
			if _, ok := values[name]; !ok {
				rep.Changed = append(rep.Changed, name)
			}
		}
	}
	slices.Sort(rep.Changed)
	s.snap.Store(next)
	return rep, true
}

// Available reports whether the credential name has a value now.
func (s *Store) Available(name string) bool {
	if s == nil {
		return false
	}
	snap := s.snap.Load()
	if snap == nil {
		return false
	}
	_, ok := snap.values[name]
	return ok
}

// Lookup returns the header value of the credential name in format (a
// format policy accepted: "{}" once, where the value goes), as a
// one-element slice to be set as the header's values and never modified;
// false when the credential is unavailable. It allocates nothing once the
// pair was asked of the snapshot in force (the first ask formats it). A
// nil Store holds nothing.
func (s *Store) Lookup(name, format string) ([]string, bool) {
	if s == nil {
		return nil, false
	}
	snap := s.snap.Load()
	if snap == nil {
		return nil, false
	}
	if h, ok := snap.headers[pair{name, format}]; ok {
		return h, true
	}
	if _, ok := snap.values[name]; !ok {
		return nil, false
	}
	return s.format(name, format)
}

// format adds the pair to the snapshot in force (copied: readers hold the
// old one) and returns its header value.
func (s *Store) format(name, format string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snap.Load()
	if h, ok := snap.headers[pair{name, format}]; ok {
		return h, true
	}
	v, ok := snap.values[name]
	if !ok {
		return nil, false
	}
	next := &snapshot{values: snap.values, headers: maps.Clone(snap.headers)}
	h := header(format, v)
	next.headers[pair{name, format}] = h
	s.snap.Store(next)
	return h, true
}

// header formats v into format at its placeholder.
func header(format, v string) []string {
	prefix, suffix, _ := strings.Cut(format, "{}")
	return []string{prefix + v + suffix}[:1:1]
}

// read loads every credential file of dir: regular files (or links to
// them, as a Secret volume's keys are) whose names do not start with "."
// (the volume's ..data and timestamped directories).
func read(dir string) (map[string]string, Report) {
	values := map[string]string{}
	rep := Report{Unavailable: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return values, rep
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(dir, name)
		if st, err := os.Stat(full); err != nil || st.IsDir() {
			continue // a dangling link mid-swap, a directory
		}
		v, problem := readValue(full)
		if problem != "" {
			rep.Unavailable[name] = problem
			continue
		}
		values[name] = v
		rep.Available = append(rep.Available, name)
	}
	slices.Sort(rep.Available)
	return values, rep
}

// readValue reads one credential file: its value without trailing line
// breaks, or the problem that makes it unavailable.
func readValue(path string) (string, string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ProblemRead
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxValueBytes+3))
	if err != nil {
		return "", ProblemRead
	}
	v := strings.TrimRight(string(b), "\r\n")
	switch {
	case v == "":
		return "", ProblemEmpty
	case len(v) > MaxValueBytes:
		return "", ProblemTooLong
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return "", ProblemControl
		}
	}
	return v, ""
}
