package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "b")
	write("a.yml", "a")
	write("c.json", "c")
	write("notes.txt", "skipped")
	write(".hidden.yaml", "skipped")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	files, err := Read([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f.Path)+"="+string(f.Data))
	}
	if strings.Join(got, ",") != "a.yml=a,b.yaml=b,c.json=c" {
		t.Errorf("got %v", got)
	}
	if _, err := Read([]string{filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Error("missing file gave no error")
	}
}

func TestWatcherPoll(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls []string
	w := &Watcher{Paths: []string{p}, OnChange: func(files []File, err error) {
		if err != nil {
			calls = append(calls, "error")
			return
		}
		calls = append(calls, string(files[0].Data))
	}}
	steps := []struct {
		name   string
		change func()
		called bool
	}{
		{"first poll reports", func() {}, true},
		{"unchanged is quiet", func() {}, false},
		{"new content reports", func() { os.WriteFile(p, []byte("two"), 0o600) }, true},
		{"removed file reports an error", func() { os.Remove(p) }, true},
		{"still removed is quiet", func() {}, false},
		{"restored reports", func() { os.WriteFile(p, []byte("two"), 0o600) }, true},
	}
	for _, s := range steps {
		s.change()
		if got := w.Poll(); got != s.called {
			t.Fatalf("%s: Poll() = %v", s.name, got)
		}
	}
	if strings.Join(calls, ",") != "one,two,error,two" {
		t.Errorf("calls = %v", calls)
	}
}
