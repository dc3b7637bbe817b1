package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoScript runs examples/demo/demo.sh end to end (its own origin on
// 127.0.0.1, egressd started and stopped by the script) and checks each
// part of its output for the lines that show the behaviour.
func TestDemoScript(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (scripts/deps installs it)", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "egressd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/egressd")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	cmd := exec.Command("bash", "examples/demo/demo.sh")
	cmd.Dir = root
	// Ports of their own, away from a `make demo` on the same machine
	// (the origin's 23443 is named by the demo's policies).
	cmd.Env = append(os.Environ(), "EGRESSD="+bin, "EGRESSD_DEMO_PORT_BASE=23610", "NO_PROXY=", "no_proxy=")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	// The output's parts, each from its heading to the next part's.
	parts := []struct {
		name, from string
		want       []string
		never      []string
	}{
		{
			name: "blind download and denials",
			from: "== 1. allowed",
			want: []string{"downloaded 1048576 bytes", "X-Egressd-Reason: not-allowlisted", "X-Egressd-Reason: metadata",
				`"host":"eu1.blob.demo.test"`},
		},
		{
			name: "inspected 302 recorded, the blob host refused, a denied path",
			from: "== TLS inspection",
			want: []string{"CONNECT tunnel failed, response 403", "status 403, X-Egressd-Reason: path-not-allowed",
				"models.demo.test  GET 302  allowed  redirect_host=eu1.blob.demo.test",
				"models.demo.test  GET 403  path-not-allowed"},
		},
		{
			name: "suggest marks the blob host from the recorded redirect",
			from: "== 6. egressd suggest",
			want: []string{"# denied in enforce mode, not suggested:", "eu1.blob.demo.test",
				`hosts: ["eu1.blob.demo.test"]`, `purpose: "redirect target of models.demo.test"`},
			never: []string{"redirect target of models.demo.test?"},
		},
		{
			name: "with the blob host's rule: the 302 and the blob's 200",
			from: "== 7. with the blob host's rule",
			want: []string{"downloaded 1048576 bytes", "models.demo.test  GET 302  allowed  redirect_host=eu1.blob.demo.test",
				"eu1.blob.demo.test  GET 200  allowed", `"inspected":true`},
		},
		{
			name:  "credentials: the call succeeds without a key in the pod, the record names it",
			from:  "== 8. credentials",
			want:  []string{`"content":"hello from the model"`, "status 200", `"reason":"allowed"`, `"credential":"openai"`},
			never: []string{"DEMO-KEY"},
		},
		{
			name:  "the demo verifies its own signed records",
			from:  "== 9. egressd verify",
			want:  []string{" records in 5 logs"},
			never: []string{"FAILED", "altered log=", "missing log=", "truncated log=", "unterminated log="},
		},
	}
	for i, p := range parts {
		t.Run(p.name, func(t *testing.T) {
			start := strings.Index(out, p.from)
			if start < 0 {
				t.Fatalf("no %q in the output:\n%s", p.from, out)
			}
			part := out[start:]
			if i+1 < len(parts) {
				if end := strings.Index(part, parts[i+1].from); end >= 0 {
					part = part[:end]
				}
			}
			for _, w := range p.want {
				if !strings.Contains(part, w) {
					t.Errorf("no %q in:\n%s", w, part)
				}
			}
			for _, n := range p.never {
				if strings.Contains(part, n) {
					t.Errorf("%q in:\n%s", n, part)
				}
			}
		})
	}
	for _, never := range []string{"UNEXPECTED", "DEMO-SECRET", "sig=", "DEMO-KEY"} {
		if strings.Contains(out, never) {
			t.Errorf("the output holds %q:\n%s", never, out)
		}
	}
}
