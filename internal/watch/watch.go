// Package watch reads configuration files and notices when they change, for
// the policy files and the pods file of `egressd run`. It polls content
// hashes instead of using inotify: Kubernetes mounts ConfigMaps through a
// symlink swap (..data) that inotify watchers are known to miss, and a poll
// of a few small files each second costs nothing.
//
// watch imports only the standard library.
package watch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file read from a watched path.
type File struct {
	Path string
	Data []byte
}

// maxFileSize bounds what one configuration file may hold.
const maxFileSize = 16 << 20

// Read returns the files of paths: a file as itself, a directory as its
// *.yaml, *.yml and *.json files (not recursive, hidden names skipped),
// sorted by path so that results are stable.
func Read(paths []string) ([]File, error) {
	var out []File
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		if !st.IsDir() {
			f, err := readFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || !hasConfigExt(n) {
				continue
			}
			full := filepath.Join(p, n)
			if st, err := os.Stat(full); err != nil || st.IsDir() {
				continue // a dangling link or a directory named x.yaml
			}
			names = append(names, full)
		}
		sort.Strings(names)
		for _, n := range names {
			f, err := readFile(n)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func hasConfigExt(n string) bool {
	switch filepath.Ext(n) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func readFile(p string) (File, error) {
	f, err := os.Open(p)
	if err != nil {
		return File{}, fmt.Errorf("watch: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return File{}, fmt.Errorf("watch: %w", err)
	}
	if len(data) > maxFileSize {
		return File{}, fmt.Errorf("watch: %s: over the %d byte limit", p, maxFileSize)
	}
	return File{Path: p, Data: data}, nil
}

// Watcher calls OnChange with the files of Paths whenever their content
// changes (and once at the start).
type Watcher struct {
	// Paths are files or directories, as for Read.
	Paths []string
	// Interval between polls; zero means one second.
	Interval time.Duration
	// OnChange receives the new files, or the error reading them. It is
	// called from one goroutine at a time.
	OnChange func([]File, error)

	last [32]byte
	seen bool
}

// Poll reads the paths once and calls OnChange when the content differs from
// the last poll (a read error is reported every time it changes too). It
// returns whether OnChange was called. Tests call it directly.
func (w *Watcher) Poll() bool {
	files, err := Read(w.Paths)
	h := sha256.New()
	if err != nil {
		h.Write([]byte("error\x00" + err.Error()))
	}
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(f.Data))
		h.Write(f.Data)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if w.seen && sum == w.last {
		return false
	}
	w.seen, w.last = true, sum
	w.OnChange(files, err)
	return true
}

// Retry makes the next Poll call OnChange even when nothing changed: for
// files OnChange refused that become good without changing (a CA whose
// validity has not begun). Call it from OnChange or from Poll's
// goroutine.
func (w *Watcher) Retry() { w.seen = false }

// Run polls until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	iv := w.Interval
	if iv <= 0 {
		iv = time.Second
	}
	Every(ctx, iv, func() { w.Poll() })
}

// Every calls f every interval until ctx ends (the first call one interval
// from now).
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
