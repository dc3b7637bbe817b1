package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// idsInDir reads every file in dir as JSON lines and counts the ids. A
// file must end with a whole line and every line must be a record.
func idsInDir(t *testing.T, dir string) (map[string]int, int) {
	t.Helper()
	ids := map[string]int{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue
		}
		files++
		if b[len(b)-1] != '\n' {
			t.Fatalf("%s ends inside a record: %q", e.Name(), b[max(0, len(b)-80):])
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'}) {
			var r record.Record
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("%s: line %q: %v", e.Name(), line, err)
			}
			ids[r.ID]++
		}
	}
	return ids, files
}

// TestFileRotationUnderLoad writes from many goroutines while the file is
// rotated by size, by logrotate (rename, then Reopen as on SIGHUP), or
// both: every record is in exactly one file, whole.
func TestFileRotationUnderLoad(t *testing.T) {
	cases := []struct {
		name      string
		maxMiB    int
		logrotate bool
		minFiles  int
	}{
		{"size", 1, false, 4},                // 4.8 MB in 1 MiB files
		{"logrotate and SIGHUP", 0, true, 4}, // each renamed file holds records
		{"both", 1, true, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "audit.jsonl")
			f, err := OpenFile(FileConfig{Path: path, MaxSizeMiB: tc.maxMiB})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m := metrics.New()
			l := New(Config{Writers: []io.Writer{f}, Metrics: m, FlushInterval: time.Millisecond})
			// 12,000 records of ~400 bytes: ~4.8 MB. With logrotate, the
			// writers meet the rotator three times (after a quarter, a half
			// and three quarters): each rename happens while the sink still
			// writes the records queued before it, and records follow it.
			const writers, each, renames = 8, 1500, 3
			pad := strings.Repeat("p", 200)
			renamed := make([]chan struct{}, renames)
			for i := range renamed {
				renamed[i] = make(chan struct{})
			}
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range each {
						if k := i / (each / (renames + 1)); tc.logrotate && i%(each/(renames+1)) == 0 && k > 0 {
							<-renamed[k-1]
						}
						l.Write(&record.Record{ID: fmt.Sprintf("g%d-%d", g, i), Kind: record.KindDNS, Host: "h.test", Error: pad})
					}
				})
			}
			if tc.logrotate {
				for k := range renames {
					// Only a file that holds records is rotated.
					for {
						if err := l.Flush(); err != nil {
							t.Fatal(err)
						}
						if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
							break
						}
					}
					// logrotate's create mode: rename, create, then SIGHUP.
					for {
						err := os.Rename(path, fmt.Sprintf("%s.%d", path, k+1))
						if errors.Is(err, fs.ErrNotExist) && tc.maxMiB > 0 {
							continue // lumberjack is between its own rename and create
						}
						if err != nil {
							t.Fatal(err)
						}
						break
					}
					if err := l.Reopen(); err != nil {
						t.Fatal(err)
					}
					close(renamed[k])
				}
			}
			wg.Wait()
			total := writers * each
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ids, files := idsInDir(t, dir)
			if files < tc.minFiles {
				t.Errorf("%d files, want at least %d: rotation did not happen under load", files, tc.minFiles)
			}
			if len(ids) != total {
				t.Errorf("%d distinct ids, want %d", len(ids), total)
			}
			for id, n := range ids {
				if n != 1 {
					t.Fatalf("id %s in %d lines", id, n)
				}
			}
			if d := testCounter(m.AuditDropped); d != 0 {
				t.Errorf("dropped %v", d)
			}
		})
	}
}

func TestFileMaxBackups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	f, err := OpenFile(FileConfig{Path: path, MaxSizeMiB: 1, MaxBackups: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := append(bytes.Repeat([]byte("x"), 64<<10-1), '\n')
	for range 4 * 16 { // 4 MiB: three rotations
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	// lumberjack removes old backups on a goroutine of its own after each
	// rotation; the deadline only turns a hang into a failure.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 2 { // the file and one backup
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files, want the file and one backup", len(entries))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		cfg     FileConfig
		wantErr bool
	}{
		{"plain", FileConfig{Path: filepath.Join(dir, "a.jsonl")}, false},
		{"size rotation", FileConfig{Path: filepath.Join(dir, "b.jsonl"), MaxSizeMiB: 1, MaxBackups: 2}, false},
		{"no path", FileConfig{}, true},
		{"missing directory", FileConfig{Path: filepath.Join(dir, "missing", "a.jsonl")}, true},
		{"a directory", FileConfig{Path: dir}, true},
		{"negative size", FileConfig{Path: filepath.Join(dir, "c.jsonl"), MaxSizeMiB: -1}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := OpenFile(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "audit: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				return
			}
			defer f.Close()
			fi, err := os.Stat(tc.cfg.Path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want 0640", fi.Mode().Perm())
			}
		})
	}
}
