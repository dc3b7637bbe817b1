package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainHTTPRequest: --path and --method are decided by an inspecting
// rule's http entries, as run decides a request inside the tunnel; a blind
// rule's tunnel is not looked into.
func TestExplainHTTPRequest(t *testing.T) {
	dir := t.TempDir()
	pol, pods := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, pol, strings.ReplaceAll(inspectE2EPolicy, "PORT", "443"))
	writeFile(t, pods, e2ePods)
	for _, tt := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"allowed path", []string{"--host", "api.test", "--path", "/v1/models"}, 0, "GET /v1/models: inspected"},
		{"denied method", []string{"--host", "api.test", "--path", "/v1/models", "--method", "POST"}, 1, "reason method-not-allowed"},
		{"denied path", []string{"--host", "api.test", "--path", "/v1/files?purpose=x"}, 1, "reason path-not-allowed"},
		{"bad path", []string{"--host", "api.test", "--path", "/v1/../models"}, 1, "reason bad-request"},
		{"blind rule", []string{"--host", "models.test", "--path", "/anything", "--method", "DELETE"}, 0, "does not inspect"},
		{"not a tunnel", []string{"--host", "api.test", "--kind", "dns", "--path", "/v1/models"}, 2, "--kind connect or sni"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--policy", pol, "--pods", pods, "--pod", "llm-prod/llm-0"}, tt.args...)
			if !strings.Contains(strings.Join(tt.args, " "), "--kind dns") {
				args = append(args, "--port", "443")
			}
			var stdout, stderr bytes.Buffer
			code := explainMain(context.Background(), args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.out) {
				t.Fatalf("explain %v: exit %d\n%s%s\nwant %d and %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out)
			}
		})
	}
}
