package policy

import (
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestPure holds the package to its imports (doc.go): the standard library
// without I/O, networking or logging, apimachinery and the API types, the
// YAML/JSON decoders and x/net's idna and publicsuffix.
func TestPure(t *testing.T) {
	allowed := []string{"k8s.io/apimachinery/", "k8s.io/api/", "sigs.k8s.io/yaml", "sigs.k8s.io/json", "golang.org/x/net/idna", "golang.org/x/net/publicsuffix"}
	forbidden := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "log": true, "log/slog": true, "io/ioutil": true, "syscall": true, "unsafe": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		// Generators (//go:build ignore) are programs, not the package.
		if ok, err := build.Default.MatchFile(".", f); err != nil || !ok {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			std := !strings.Contains(first, ".")
			switch {
			case std && forbidden[path]:
				t.Errorf("%s imports %s: the policy package does no I/O and no logging", f, path)
			case std:
			case !hasAnyPrefix(path, allowed):
				t.Errorf("%s imports %s: not on the policy package's list", f, path)
			}
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// TestSnapshotConcurrent runs decisions from several goroutines on one
// snapshot; with -race it proves Decide writes nothing shared.
func TestSnapshotConcurrent(t *testing.T) {
	s := decideSnapshot(t)
	c := testClient("prod", map[string]string{"app": "llm"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if d := s.Decide(DecideArgs{Client: c, Host: "a.blob.example.net", Port: 443}); !d.Allowed() {
					t.Errorf("denied: %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
}
