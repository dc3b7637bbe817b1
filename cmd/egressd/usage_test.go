package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// dispatch runs a command with no standard input, as most tests do.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatchIO(ctx, args, nil, stdout, stderr)
}

// TestHelpSpellsFlagsAsDocs: every command's -h writes its flags as the
// docs do (--name; -x only for a one-letter name), and --audit-http-path
// says it applies inside inspected tunnels too.
func TestHelpSpellsFlagsAsDocs(t *testing.T) {
	single := regexp.MustCompile(`(?m)^  -[A-Za-z0-9][-A-Za-z0-9]`)
	for _, cmd := range []string{"run", "check", "netpol", "probe", "explain", "report", "suggest", "keygen", "verify", "preflight", "version"} {
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := dispatchIO(context.Background(), []string{cmd, "-h"}, strings.NewReader(""), &out, &errb); code != 0 {
				t.Fatalf("exit %d\n%s", code, errb.String())
			}
			help := errb.String() + out.String()
			if !strings.Contains(help, "  --") {
				t.Errorf("no --flag in the help:\n%s", help)
			}
			if m := single.FindString(help); m != "" {
				t.Errorf("%q: a flag spelt with one dash:\n%s", m, help)
			}
			if cmd == "run" && !strings.Contains(help, "inspected tunnels") {
				t.Errorf("--audit-http-path's help does not name inspected tunnels:\n%s", help)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := "egressd dev (" + runtime.Version() + ", contract revision 4)\n"; out.String() != want {
		t.Errorf("version %q, want %q", out.String(), want)
	}
	out.Reset()
	if code := dispatch(context.Background(), []string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var v struct {
		Version          string `json:"version"`
		Go               string `json:"go"`
		ContractRevision int    `json:"contract_revision"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version != "dev" || v.Go != runtime.Version() || v.ContractRevision != 4 {
		t.Errorf("--json %q: %+v, %v", out.String(), v, err)
	}
	if code := dispatch(context.Background(), []string{"version", "--yaml"}, &out, &errb); code != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", code)
	}
}

// TestStartWithInvalidPolicy: egressd started on an invalid policy says
// that no policy is in force (not that the last good one stays), /readyz
// says why it is not ready, and a valid policy makes it ready.
func TestStartWithInvalidPolicy(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	writeFile(t, policyFile, strings.Replace(strings.ReplaceAll(e2ePolicy, "PORT", w.port), "ports: [", "ports: [70000, ", 1))
	pods := filepath.Join(dir, "pods.yaml")
	writeFile(t, pods, e2ePods)
	in := startEgressdArgs(t, w, "--policy", policyFile, "--pods", pods)
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + in.metrics + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || body != "not ready: no policy accepted yet\n" {
		t.Errorf("/readyz %d %q", code, body)
	}
	logs := in.logs.String()
	if !strings.Contains(logs, "no policy was accepted yet") || strings.Contains(logs, "last good policy stays in force") {
		t.Errorf("the log does not say that no policy is in force:\n%s", logs)
	}
	writeFile(t, policyFile, strings.ReplaceAll(e2ePolicy, "PORT", w.port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 20s after a valid policy: %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
