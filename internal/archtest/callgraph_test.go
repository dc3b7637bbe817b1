package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// calls returns every call's function expression ("s.admit.Admit") in
// the non-test Go files of dir.
func calls(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				out = append(out, types.ExprString(c.Fun))
			}
			return true
		})
	}
	return out
}

// callGraphRows are the rows of docs/architecture.md's "Proxy request
// flow" table that say a DNS question goes through admit, each with the
// calls that must be in the code of its callers and those that must not
// (a second identify or decide of their own).
var callGraphRows = []struct {
	row     string // the start of the table row
	callers map[string][]string
	never   map[string][]string
}{
	{
		row: "| identify | `admit.Pipeline.Identify`",
		callers: map[string][]string{
			"dnsserver": {"s.admit.Identify"},
			"explain":   {"findClient"}, // with pipe.Identify
		},
		never: map[string][]string{"dnsserver": {"s.cfg.Identity.Lookup"}},
	},
	{
		row:     "| decide a DNS question | `admit.Pipeline.Admit` with `AnyPort`",
		callers: map[string][]string{"dnsserver": {"s.admit.Admit"}, "explain": {"pipe.Admit"}},
		never:   map[string][]string{"dnsserver": {"snap.Decide", "policy.NormalizeHost", "s.route", "s.searchExpansion"}},
	},
	{
		row:     "| an allowed question's never-class answer | `admit.AllNever`",
		callers: map[string][]string{"dnsserver": {"admit.AllNever"}, "explain": {"admit.AllNever"}},
	},
}

// TestCallGraphTable: docs/architecture.md's call-graph table says that a
// DNS query goes through the same admit steps as a CONNECT, and the code
// of the DNS server and of explain does so (issue 24): the calls named
// are there, and no identify or decide of their own.
func TestCallGraphTable(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range callGraphRows {
		i := strings.Index(string(doc), "\n"+r.row)
		if i < 0 {
			t.Errorf("docs/architecture.md has no row %q", r.row)
			continue
		}
		line, _, _ := strings.Cut(string(doc[i+1:]), "\n")
		for pkg, want := range r.callers {
			if pkg == "dnsserver" && !strings.Contains(line, "the DNS server") {
				t.Errorf("docs/architecture.md row %q does not name the DNS server", r.row)
			}
			got := calls(t, filepath.Join(root, pkg))
			for _, c := range want {
				if !slices.Contains(got, c) {
					t.Errorf("%s does not call %s (docs/architecture.md: %q)", pkg, c, r.row)
				}
			}
			for _, c := range r.never[pkg] {
				if slices.Contains(got, c) {
					t.Errorf("%s calls %s: a step of its own beside admit's (%q)", pkg, c, r.row)
				}
			}
		}
	}
}
