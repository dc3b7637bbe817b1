package archtest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A doc.go that names what its package imports ("It imports admit,
// resolver and policy; ...") names the package's imports of this module
// exactly: TestDocImports holds each such sentence against `go list`.

var (
	parenthetical = regexp.MustCompile(`\([^()]*\)`)
	// importsClause is a statement of what the package imports: its
	// subject (It, it, the package's name, "... and") and what follows,
	// up to the end of the clause.
	importsClause = regexp.MustCompile(`(?:^|\s)(It|it|and|[a-z0-9]+)\s+imports\s+([^;]*?)(?:;|\.\s|\.$|:\s|$)`)
	word          = regexp.MustCompile(`[A-Za-z0-9_./-]+`)
)

// docText is the comment of a doc.go as one line: comment markers gone,
// parentheticals (reasons, "and through it record") dropped.
func docText(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if text, ok := strings.CutPrefix(line, "//"); ok {
			b.WriteString(strings.TrimSpace(text))
			b.WriteByte(' ')
		}
	}
	s := b.String()
	for {
		t := parenthetical.ReplaceAllString(s, "")
		if t == s {
			return strings.Join(strings.Fields(s), " ")
		}
		s = t
	}
}

// docImports returns the packages of this module (module-relative) that
// the doc.go text of the package named base says it imports, and whether
// it says so at all. names maps what a doc may call a package (its path,
// or its last element when no other package has it) to its path.
func docImports(text, base string, names map[string]string) ([]string, bool) {
	var out []string
	said := false
	for _, m := range importsClause.FindAllStringSubmatch(text, -1) {
		if subj := m[1]; subj != "It" && subj != "it" && subj != "and" && subj != base {
			continue
		}
		if strings.HasPrefix(m[2], "it ") || m[2] == "it" { // "cmd imports it"
			continue
		}
		said = true
		list, _, _ := strings.Cut(m[2], " so that ") // "..., so that audit can use it"
		for _, w := range word.FindAllString(list, -1) {
			if p, ok := names[strings.TrimRight(w, ".")]; ok && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, said
}

// packageNames maps what a doc.go may call each package of the module.
func packageNames(pkgs []pkg) map[string]string {
	names := map[string]string{}
	last := map[string][]string{}
	for _, p := range pkgs {
		r, ok := rel(p.ImportPath)
		if !ok || r == "" {
			continue
		}
		names[r] = r
		last[path.Base(r)] = append(last[path.Base(r)], r)
	}
	for base, rs := range last {
		if _, taken := names[base]; !taken && len(rs) == 1 {
			names[base] = rs[0]
		}
	}
	return names
}

// moduleImports are p's direct imports of this module, its own
// sub-packages left out.
func moduleImports(p pkg) []string {
	self, _ := rel(p.ImportPath)
	var out []string
	for _, imp := range p.Imports {
		if r, ok := rel(imp); ok && !under(r, self) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// checkDocImports compares what text (package p's doc.go) says p imports
// with what it imports; "" when they agree or text says nothing.
func checkDocImports(p pkg, text string, names map[string]string) string {
	self, _ := rel(p.ImportPath)
	said, ok := docImports(text, path.Base(self), names)
	if !ok {
		return ""
	}
	got := moduleImports(p)
	if slices.Equal(said, got) {
		return ""
	}
	var missing, extra []string
	for _, g := range got {
		if !slices.Contains(said, g) {
			missing = append(missing, g)
		}
	}
	for _, s := range said {
		if !slices.Contains(got, s) {
			extra = append(extra, s)
		}
	}
	return fmt.Sprintf("%s/doc.go says it imports %v of this module; go list says %v (not named: %v; named but not imported: %v)",
		self, said, got, missing, extra)
}

// TestDocImports: every doc.go that says what its package imports says it
// right.
func TestDocImports(t *testing.T) {
	pkgs := listPackages(t)
	names := packageNames(pkgs)
	root := filepath.Join("..", "..")
	checked := 0
	for _, p := range pkgs {
		self, ok := rel(p.ImportPath)
		if !ok || self == "" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(self), "doc.go"))
		if err != nil {
			continue
		}
		text := docText(string(src))
		if _, said := docImports(text, path.Base(self), names); said {
			checked++
		}
		if msg := checkDocImports(p, text, names); msg != "" {
			t.Error(msg)
		}
	}
	if checked < 10 {
		t.Errorf("only %d doc.go files name their imports: the sentence parser lost them", checked)
	}
}

// TestDocImportsFires: a sentence that names too few, too many or the
// wrong packages is caught; one that names them right, in the forms the
// doc.go files use, is not.
func TestDocImportsFires(t *testing.T) {
	names := map[string]string{"policy": "policy", "record": "record", "audit": "audit",
		"internal/metrics": "internal/metrics", "metrics": "internal/metrics", "resolver": "resolver"}
	p := pkg{ImportPath: module + "/x", Imports: []string{module + "/policy", module + "/internal/metrics", module + "/x/sub", "fmt"}}
	for _, c := range []struct {
		name, doc string
		fires     bool
	}{
		{"right", "// It imports policy and metrics; it must not import audit.", false},
		{"right, full path and a reason", "// x imports policy (for audit's reasons) and internal/metrics.", false},
		{"right, over two lines", "// Of this module it imports policy\n// and internal/metrics. Nothing imports it.", false},
		{"one missing", "// It imports policy only; it must not import audit.", true},
		{"one too many", "// It imports policy, record and metrics.", true},
		{"none, wrongly", "// It imports no other package of this module.", true},
		{"a purpose after the list", "// It imports policy and metrics, so that audit can use it.", false},
		{"says nothing", "// Package x does things; cmd imports it.", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := checkDocImports(p, docText(c.doc), names)
			if (msg != "") != c.fires {
				t.Errorf("fires %v, want %v: %q", msg != "", c.fires, msg)
			}
		})
	}
}
