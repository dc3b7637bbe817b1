package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
)

// loaderPolicy is a valid policy; NAME, NS and RULES are replaced.
const loaderPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: NAME, namespace: NS}
spec:
  podSelector: {}
  egress:
RULES`

func loaderDoc(name, rules string) string {
	if rules == "" {
		rules = "  - hosts: [api.example.com]\n    ports: [443]\n"
	}
	return strings.NewReplacer("NAME", name, "NS", "llm-prod", "RULES", rules).Replace(loaderPolicy)
}

// TestCheckAgreesWithRun: for every policy set, egressd check exits 0
// exactly when run's loader (the reload callback a running egressd uses,
// at start and on every change) puts the set in force, with and without
// an inspection CA (check --inspect).
func TestCheckAgreesWithRun(t *testing.T) {
	ok := loaderDoc("ok", "")
	second := loaderDoc("second", "")
	cases := []struct {
		name  string
		files map[string]string // file name → content
		want  bool              // accepted without an inspection CA
	}{
		{"one valid policy", map[string]string{"a.yaml": ok}, true},
		{"two files", map[string]string{"a.yaml": ok, "b.yaml": second}, true},
		{"two documents in one file", map[string]string{"a.yaml": ok + "---\n" + second}, true},
		{"empty file", map[string]string{"a.yaml": ""}, true},
		{"comments only", map[string]string{"a.yaml": "# nothing yet\n---\n# still nothing\n"}, true},
		{"a List", map[string]string{"a.yaml": "apiVersion: v1\nkind: List\nitems:\n- " +
			strings.ReplaceAll(strings.TrimSuffix(ok, "\n"), "\n", "\n  ") + "\n"}, true},
		{"json file", map[string]string{"a.json": `{"apiVersion":"egressd.dev/v1alpha1","kind":"EgressPolicy","metadata":{"name":"j","namespace":"n"},"spec":{"podSelector":{},"egress":[{"hosts":["a.example.com"],"ports":[443]}]}}`}, true},
		{"duplicate name across files", map[string]string{"a.yaml": ok, "b.yaml": ok}, false},
		{"duplicate name within a file", map[string]string{"a.yaml": ok + "---\n" + ok}, false},
		{"duplicate name, other files valid", map[string]string{"a.yaml": ok, "b.yaml": second, "c.yaml": ok}, false},
		{"same name in two namespaces", map[string]string{"a.yaml": ok, "b.yaml": strings.Replace(ok, "llm-prod", "other", 1)}, true},
		{"one invalid file of two", map[string]string{"a.yaml": ok, "b.yaml": loaderDoc("bad", "  - hosts: [a.example.com]\n    ports: [70000]\n")}, false},
		{"port out of range", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [0]\n")}, false},
		{"port as a name", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [https]\n")}, false},
		{"no ports", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n")}, false},
		{"bad host pattern", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [\"*.com\"]\n    ports: [443]\n")}, false},
		{"no hosts nor cidrs", map[string]string{"a.yaml": loaderDoc("p", "  - ports: [443]\n")}, false},
		{"no rules", map[string]string{"a.yaml": loaderDoc("p", "  []\n")}, false},
		{"bad phase", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    phase: start\n")}, false},
		{"bad ech", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    ech: yes\n")}, false},
		{"bad mode", map[string]string{"a.yaml": strings.Replace(ok, "podSelector: {}", "podSelector: {}\n  mode: permissive", 1)}, false},
		{"audit mode", map[string]string{"a.yaml": strings.Replace(ok, "podSelector: {}", "podSelector: {}\n  mode: audit", 1)}, true},
		{"unknown field", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    hostz: [b.example.com]\n")}, false},
		{"wrong kind", map[string]string{"a.yaml": strings.Replace(ok, "kind: EgressPolicy", "kind: NetworkPolicy", 1)}, false},
		{"not YAML", map[string]string{"a.yaml": ok + "---\nspec: [unclosed\n"}, false},
		{"missing namespace", map[string]string{"a.yaml": strings.Replace(ok, ", namespace: llm-prod", "", 1)}, false},
		{"host cidr not masked", map[string]string{"a.yaml": loaderDoc("p", "  - cidrs: [10.0.0.1/16]\n    ports: [5432]\n")}, false},
		{"http entries on a blind rule", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    http: [{methods: [GET]}]\n")}, false},
		{"inspect", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    inspect: true\n")}, false},
		{"bad selector", map[string]string{"a.yaml": strings.Replace(ok, "podSelector: {}", "podSelector: {matchExpressions: [{key: app, operator: Sideways}]}", 1)}, false},
		// Every lint warns and loads.
		{"lint: private suffix", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [\"*.s3.amazonaws.com\"]\n    ports: [443]\n")}, true},
		{"lint: registry", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [ghcr.io]\n    ports: [443]\n")}, true},
		{"lint: wide address rule", map[string]string{"a.yaml": loaderDoc("p", "  - cidrs: [10.0.0.0/8]\n    ports: [5432]\n")}, true},
		{"lint: every address beside hosts", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [db.example.com]\n    cidrs: [0.0.0.0/0]\n    ports: [5432]\n")}, true},
		{"lint: duplicate rule", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n  - hosts: [a.example.com]\n    ports: [443]\n")}, true},
		{"lint: shadowed rule", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [\"*.example.com\"]\n    ports: [443]\n  - hosts: [a.example.com]\n    ports: [443]\n")}, true},
		{"lint: covered pattern", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [\"*.example.com\", a.example.com]\n    ports: [443]\n")}, true},
		{"lint: inspect beside blind", map[string]string{"a.yaml": loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    inspect: true\n  - hosts: [\"*.example.com\"]\n    ports: [443]\n")}, false},
		{"rule names", map[string]string{"a.yaml": loaderDoc("p", "  - name: api\n    hosts: [a.example.com]\n    ports: [443]\n  - name: db\n    hosts: [db.example.com]\n    ports: [5432]\n")}, true},
		{"duplicate rule name", map[string]string{"a.yaml": loaderDoc("p", "  - name: api\n    hosts: [a.example.com]\n    ports: [443]\n  - name: api\n    hosts: [db.example.com]\n    ports: [5432]\n")}, false},
		{"rule name not a DNS label", map[string]string{"a.yaml": loaderDoc("p", "  - name: API_1\n    hosts: [a.example.com]\n    ports: [443]\n")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			inspectOnly := strings.Contains(tc.name, "inspect")
			for _, ca := range []bool{false, true} {
				var stdout, stderr bytes.Buffer
				args := []string{"--policy", dir}
				if ca {
					args = append(args, "--inspect")
				}
				checkOK := checkMain(args, &stdout, &stderr) == 0

				st := &state{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: metrics.New(), pods: identity.NewStore()}
				st.validate = policy.ValidateOptions{InspectAvailable: ca}
				st.watchPolicies([]string{dir}, 0).Poll()
				runOK := st.snapshot.Load() != nil

				if checkOK != runOK {
					t.Errorf("inspection CA %v: check accepts %v, run accepts %v\ncheck: %s%s", ca, checkOK, runOK, stdout.String(), stderr.String())
				}
				want := tc.want || (ca && inspectOnly)
				if runOK != want {
					t.Errorf("inspection CA %v: accepted %v, want %v\ncheck: %s%s", ca, runOK, want, stdout.String(), stderr.String())
				}
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("%d policy sets, want at least 30", len(cases))
	}
}
