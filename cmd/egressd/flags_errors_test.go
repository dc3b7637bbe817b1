package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPersonFacingErrors: a bad environment value says what is accepted,
// a missing required flag says it is required, check on an inspecting
// policy points at check --inspect, and a policy error names
// file:line:column and the field path without Go type names.
func TestPersonFacingErrors(t *testing.T) {
	dir := t.TempDir()
	insp := filepath.Join(dir, "inspect.yaml")
	writeFile(t, insp, loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [443]\n    inspect: true\n"))
	https := filepath.Join(dir, "llm-prod.yaml")
	writeFile(t, https, loaderDoc("ok", "")+"---\n"+loaderDoc("p", "  - hosts: [a.example.com]\n    ports: [\"https\"]\n"))
	cases := []struct {
		name string
		env  map[string]string
		run  func(stdout, stderr *bytes.Buffer) int
		want []string
		not  []string
	}{
		{"bool env", map[string]string{"EGRESSD_INSPECT": "yes"},
			func(o, e *bytes.Buffer) int { return checkMain([]string{"--policy", insp}, o, e) },
			[]string{`EGRESSD_INSPECT="yes": want true or false`}, []string{"parse error"}},
		{"explain without --port", nil,
			func(o, e *bytes.Buffer) int {
				return explainMain(t.Context(), []string{"--policy", insp, "--pods", "../../examples/pods.yaml", "--ip", "10.0.0.1", "--host", "a.example.com"}, o, e)
			},
			[]string{"--port is required"}, []string{"--port 0"}},
		{"check explains --inspect", nil,
			func(o, e *bytes.Buffer) int { return checkMain([]string{"--policy", insp}, o, e) },
			[]string{"inspect.yaml:9:14: spec.egress[0].inspect", "egressd check --inspect"}, nil},
		{"port as a name, second document", nil,
			func(o, e *bytes.Buffer) int { return checkMain([]string{"--policy", https}, o, e) },
			[]string{`llm-prod.yaml:17:13: spec.egress[0].ports[0]: want a port number 1-65535, got "https"`}, []string{"int32", "Go struct", "policy: policy:"}},
		{"report's invalid option said once", nil,
			func(o, e *bytes.Buffer) int {
				return reportMain(t.Context(), []string{"--verdict", "nope", insp}, strings.NewReader(""), o, e, time.Now())
			},
			[]string{`egressd report: invalid option: verdict "nope": want allow, deny or would-deny`}, []string{"report: report:"}},
		{"suggest's invalid option said once", nil,
			func(o, e *bytes.Buffer) int {
				return suggestMain([]string{"--fold", "1", insp}, strings.NewReader(""), o, e)
			},
			[]string{"egressd suggest: invalid option: --fold 1"}, []string{"suggest: suggest:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := tc.run(&stdout, &stderr); code == 0 {
				t.Errorf("exit 0")
			}
			out := stdout.String() + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output says %q:\n%s", n, out)
				}
			}
		})
	}
}
