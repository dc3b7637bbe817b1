package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunAuditFlagErrors(t *testing.T) {
	base := []string{"--policy", "x", "--pods", "x"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad failure mode", []string{"--audit-failure", "ajar"}, nil, `--audit-failure "ajar"`},
		{"bad failure mode from env", nil, map[string]string{"EGRESSD_AUDIT_FAILURE": "ajar"}, `--audit-failure "ajar"`},
		{"negative interim", []string{"--audit-interim", "-1s"}, nil, "--audit-interim must not be negative"},
		{"interim from env", nil, map[string]string{"EGRESSD_AUDIT_INTERIM": "soon"}, "EGRESSD_AUDIT_INTERIM"},
		{"small buffer", []string{"--audit-buffer", "4096"}, nil, "--audit-buffer 4096"},
		{"small buffer from env", nil, map[string]string{"EGRESSD_AUDIT_BUFFER": "4096"}, "--audit-buffer 4096"},
		{"max size without file", []string{"--audit-file-max-size", "100"}, nil, "need --audit-file"},
		{"backups from env without file", nil, map[string]string{"EGRESSD_AUDIT_FILE_MAX_BACKUPS": "3"}, "need --audit-file"},
		{"negative max size", []string{"--audit-file", "a", "--audit-file-max-size", "-1"}, nil, "must not be negative"},
		{"schema without export", []string{"--audit-otlp-schema", "ocsf"}, nil, "need --audit-otlp"},
		{"unknown schema", []string{"--audit-otlp", "http://127.0.0.1:9428/insert/opentelemetry/v1/logs", "--audit-otlp-schema", "ecs"}, nil, `--audit-otlp-schema "ecs": want otel`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			if code := dispatch(context.Background(), append(append([]string{"run"}, base...), tc.args...), &out, &errb); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

func TestRunHelpDescribesAuditFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"run", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-audit-file ", "SIGHUP", "-audit-file-max-size", "-audit-file-max-backups",
		"-audit-interim", "(default 1m0s)", "-audit-buffer", "(default 16777216)", "-audit-failure", `(default "closed")`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("run -h lacks %q", want)
		}
	}
}

// fileIDs returns the ids of the records in an audit file; the deadline
// only turns a hang into a failure.
func fileIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		ids[r["id"].(string)] = true
	}
	return ids
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEndToEndAuditFileReopen: logrotate's create mode. The file is
// renamed, SIGHUP makes egressd write to a new file at the path; stdout
// and the two files hold the same records, each in one file.
func TestEndToEndAuditFileReopen(t *testing.T) {
	w := startWorld(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	in := startEgressd(t, w, "--audit-file", path, "--audit-interim", "0")
	url := "https://models.test:" + w.port + "/"

	if code, _, stderr := in.curl(t, w, "127.0.0.2", "-f", url); code != 0 {
		t.Fatalf("curl: %s", stderr)
	}
	waitFor(t, "the first record in the file", func() bool { return len(fileIDs(t, path)) == 1 })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file to be reopened", func() bool { _, err := os.Stat(path); return err == nil })
	if code, _, _ := in.curl(t, w, "127.0.0.3", url); code == 0 {
		t.Fatal("a pod no policy selects got through")
	}
	waitFor(t, "the second record in the new file", func() bool { return len(fileIDs(t, path)) == 1 })

	old, cur := fileIDs(t, path+".1"), fileIDs(t, path)
	stdout := map[string]bool{}
	for _, r := range in.records(t) {
		stdout[r["id"].(string)] = true
	}
	if len(stdout) != 2 {
		t.Fatalf("%d records on stdout, want 2", len(stdout))
	}
	for id := range stdout {
		if old[id] == cur[id] {
			t.Errorf("record %s in the old file %v, in the new one %v: want exactly one", id, old[id], cur[id])
		}
	}
	if v := in.metric(t, "egressd_audit_available"); v != 1 {
		t.Errorf("egressd_audit_available %v", v)
	}
}
