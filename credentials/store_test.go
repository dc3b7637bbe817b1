package credentials

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// secretDir lays out dir as the kubelet mounts a Secret: a timestamped
// directory holding the keys, ..data a symlink to it, each key a symlink
// through ..data. swap writes the next generation and swaps ..data
// atomically (rename over the link), as the kubelet's atomic writer does.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func newSecretDir(t *testing.T, keys map[string]string) *secretDir {
	s := &secretDir{t: t, dir: t.TempDir()}
	s.swap(keys)
	return s
}

func (s *secretDir) swap(keys map[string]string) {
	s.t.Helper()
	s.gen++
	ts := fmt.Sprintf("..2026_12_02_06_00_%02d.%d", s.gen, s.gen)
	if err := os.Mkdir(filepath.Join(s.dir, ts), 0o755); err != nil {
		s.t.Fatal(err)
	}
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(s.dir, ts, k), []byte(v), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
	// Key links: added for new keys, removed for gone ones (the atomic
	// writer removes a deleted key's link after the swap).
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, ".") {
			if _, ok := keys[n]; !ok {
				os.Remove(filepath.Join(s.dir, n))
			}
		}
	}
	for k := range keys {
		link := filepath.Join(s.dir, k)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
			s.t.Fatal(err)
		}
	}
}

func lookup(t *testing.T, s *Store, name, format string) (string, bool) {
	t.Helper()
	h, ok := s.Lookup(name, format)
	if !ok {
		return "", false
	}
	if len(h) != 1 || cap(h) != 1 {
		t.Fatalf("Lookup(%q) = %d values, capacity %d; want one, capacity 1", name, len(h), cap(h))
	}
	return h[0], true
}

func TestOpenAndLookup(t *testing.T) {
	d := newSecretDir(t, map[string]string{
		"openai":    "sk-one\n",
		"crlf":      "v2\r\n",
		"empty":     "\n",
		"multiline": "a\nb\n",
		"nul":       "a\x00b",
		"long":      strings.Repeat("k", MaxValueBytes+1),
		"tab ok":    "a\tb",
	})
	s, rep, err := Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"crlf", "openai", "tab ok"}; !slices.Equal(rep.Available, want) {
		t.Fatalf("Available = %q; want %q", rep.Available, want)
	}
	wantUn := map[string]string{"empty": ProblemEmpty, "multiline": ProblemControl, "nul": ProblemControl, "long": ProblemTooLong}
	if fmt.Sprint(rep.Unavailable) != fmt.Sprint(wantUn) {
		t.Fatalf("Unavailable = %v; want %v", rep.Unavailable, wantUn)
	}
	tests := []struct {
		name, format, want string
		ok                 bool
	}{
		{"openai", "Bearer {}", "Bearer sk-one", true},
		{"openai", "{}", "sk-one", true},
		{"openai", "k={}; v=1", "k=sk-one; v=1", true},
		{"crlf", "{}", "v2", true},
		{"empty", "{}", "", false},
		{"multiline", "{}", "", false},
		{"never", "{}", "", false},
		{"..data", "{}", "", false},
	}
	for _, tt := range tests {
		got, ok := lookup(t, s, tt.name, tt.format)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%q, %q) = %q, %v; want %q, %v", tt.name, tt.format, got, ok, tt.want, tt.ok)
		}
	}
	if !s.Available("openai") || s.Available("empty") || s.Available("never") {
		t.Fatal("Available disagrees with Lookup")
	}
	var nilStore *Store
	if _, ok := nilStore.Lookup("openai", "{}"); ok || nilStore.Available("openai") {
		t.Fatal("a nil Store holds a credential")
	}
}

func TestOpenMissingDir(t *testing.T) {
	_, _, err := Open(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("Open = %v; want ErrDir naming the directory", err)
	}
}

// TestPollFollowsSwaps: a ..data swap rotates a value, removes a key (then
// unavailable: a deleted key is a revoked key) and adds one; an unchanged
// directory changes nothing.
func TestPollFollowsSwaps(t *testing.T) {
	d := newSecretDir(t, map[string]string{"openai": "sk-one\n", "other": "o"})
	s, rep, err := Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Changed, []string{"openai", "other"}) {
		t.Fatalf("first Changed = %q", rep.Changed)
	}
	if v, _ := lookup(t, s, "openai", "Bearer {}"); v != "Bearer sk-one" {
		t.Fatalf("before: %q", v)
	}
	if _, changed := s.Poll(); changed {
		t.Fatal("Poll of an unchanged directory reports a change")
	}
	d.swap(map[string]string{"openai": "sk-two\n", "added": "a"})
	rep, changed := s.Poll()
	if !changed || !slices.Equal(rep.Changed, []string{"added", "openai", "other"}) {
		t.Fatalf("Poll after swap = %+v, %v", rep, changed)
	}
	if v, _ := lookup(t, s, "openai", "Bearer {}"); v != "Bearer sk-two" {
		t.Fatalf("after rotation: %q", v)
	}
	if _, ok := s.Lookup("other", "{}"); ok {
		t.Fatal("a deleted key is still available")
	}
	if v, _ := lookup(t, s, "added", "{}"); v != "a" {
		t.Fatalf("added: %q", v)
	}
	// The directory itself gone: everything unavailable.
	if err := os.RemoveAll(d.dir); err != nil {
		t.Fatal(err)
	}
	if _, changed := s.Poll(); !changed || s.Available("openai") {
		t.Fatal("a removed directory left credentials available")
	}
}

// TestReportHoldsNoValue: nothing a load reports holds a value.
func TestReportHoldsNoValue(t *testing.T) {
	const secret = "sk-SECRET-VALUE"
	d := newSecretDir(t, map[string]string{"good": secret, "bad": secret + "\nx"})
	_, rep, err := Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%+v %v", rep, err); strings.Contains(s, "SECRET") {
		t.Fatalf("report holds the value: %s", s)
	}
}

// TestLookupNoAlloc: once a pair was asked, Lookup allocates nothing, and
// a rotation keeps it formatted.
func TestLookupNoAlloc(t *testing.T) {
	d := newSecretDir(t, map[string]string{"openai": "sk-one\n"})
	s, _, err := Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Lookup("openai", "Bearer {}")
	check := func(when string) {
		t.Helper()
		if n := testing.AllocsPerRun(1000, func() { s.Lookup("openai", "Bearer {}") }); n != 0 {
			t.Fatalf("%s: Lookup allocates %v per call", when, n)
		}
	}
	check("first load")
	d.swap(map[string]string{"openai": "sk-two\n"})
	s.Poll()
	check("after a rotation")
}

// TestConcurrentLookupAndPoll: readers see one value or the other, never
// a torn one (run with -race).
func TestConcurrentLookupAndPoll(t *testing.T) {
	d := newSecretDir(t, map[string]string{"openai": "sk-one"})
	s, _, err := Open(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, f := range []string{"Bearer {}", "{}", "x {} y"} {
					h, ok := s.Lookup("openai", f)
					if ok && !strings.Contains(h[0], "sk-one") && !strings.Contains(h[0], "sk-two") {
						t.Errorf("torn value %q", h[0])
					}
				}
			}
		})
	}
	for i := range 20 {
		d.swap(map[string]string{"openai": []string{"sk-one", "sk-two"}[i%2]})
		s.Poll()
	}
	close(stop)
	wg.Wait()
}

func BenchmarkLookup(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "openai"), []byte("sk-0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	s, _, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	s.Lookup("openai", "Bearer {}")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := s.Lookup("openai", "Bearer {}"); !ok {
				b.Fatal("unavailable")
			}
		}
	})
}
