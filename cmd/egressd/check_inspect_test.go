package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckInspect: a rule with inspect: true is an error for check as for
// run without an inspection CA, and valid with --inspect.
func TestCheckInspect(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.yaml")
	writeFile(t, f, strings.ReplaceAll(inspectE2EPolicy, "PORT", "443"))
	for _, tt := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"without --inspect", []string{"--policy", f}, 1, "TLS inspection is not available"},
		{"with --inspect", []string{"--policy", f, "--inspect"}, 0, "ok: 1 policies, 3 rules"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := checkMain(tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.out) {
				t.Fatalf("check %v: %d\n%s%s\nwant %d and %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.out)
			}
		})
	}
}
