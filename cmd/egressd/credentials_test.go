package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCredentials: check --credentials-dir warns about each rule
// whose credential the directory does not hold (absent, empty), never
// with a value; a directory that cannot be read is an error.
func TestCheckCredentials(t *testing.T) {
	dir := t.TempDir()
	pol, creds := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "creds")
	writeFile(t, pol, strings.ReplaceAll(credPolicy, "PORT", "443"))
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(creds, "openai"), "\n")
	for _, tt := range []struct {
		name  string
		args  []string
		code  int
		out   []string
		never string
	}{
		{"unavailable", []string{"--credentials-dir", creds}, 0,
			[]string{`spec.egress[0].credential.name "openai": not available in ` + creds + " (empty)",
				`spec.egress[2].credential.name "never-existed": not available in ` + creds + " (no such file)", "2 warnings"}, ""},
		{"missing directory", []string{"--credentials-dir", filepath.Join(dir, "nope")}, 1, []string{"--credentials-dir"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := checkMain(append([]string{"--inspect", "--policy", pol}, tt.args...), &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tt.code {
				t.Fatalf("check: %d\n%s; want %d", code, out, tt.code)
			}
			for _, w := range tt.out {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
		})
	}
	writeFile(t, filepath.Join(creds, "openai"), "sk-CHECK-SECRET\n")
	var stdout, stderr bytes.Buffer
	code := checkMain([]string{"--inspect", "--policy", pol, "--credentials-dir", creds}, &stdout, &stderr)
	if out := stdout.String() + stderr.String(); code != 0 || strings.Contains(out, `"openai"`) || strings.Contains(out, "CHECK-SECRET") {
		t.Fatalf("check with openai available: %d\n%s", code, out)
	}
}

// TestExplainCredential: explain shows the credential a rule adds, by
// name and header, on the rule and on an allowed request; not on a denied
// one.
func TestExplainCredential(t *testing.T) {
	dir := t.TempDir()
	pol, pods := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, pol, strings.ReplaceAll(credPolicy, "PORT", "443"))
	writeFile(t, pods, e2ePods)
	for _, tt := range []struct {
		name     string
		args     []string
		want     []string
		never    string
		wantCode int
	}{
		{"allowed", []string{"--path", "/v1/chat", "--method", "POST"}, []string{"credential openai in Authorization",
			`egressd sets Authorization to credential openai ("Bearer {}"; the value is never shown)`}, "", 0},
		{"denied", []string{"--path", "/v1/other"}, []string{"credential openai in Authorization", "path-not-allowed"}, "egressd sets", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--policy", pol, "--pods", pods, "--pod", "llm-prod/llm-0", "--host", "api.cred.test", "--port", "443"}, tt.args...)
			var stdout, stderr bytes.Buffer
			code := explainMain(context.Background(), args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tt.wantCode {
				t.Fatalf("explain: exit %d\n%s", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			if tt.never != "" && strings.Contains(out, tt.never) {
				t.Errorf("%q in:\n%s", tt.never, out)
			}
		})
	}
}
