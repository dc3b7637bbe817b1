package fault

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignedRecordsSignals: the real binary with --audit-signing-key.
// A run stopped by SIGTERM verifies clean, across a logrotate-style
// rename and SIGHUP (the new file starts with a rotation checkpoint); a
// run killed by SIGKILL verifies with only `unterminated`, which --strict
// turns into a failure. The signer key is in no file or output.
func TestSignedRecordsSignals(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	if out, err := exec.Command(egressdBin, "keygen", "--name", "fault", "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v %s", err, out)
	}
	key, pub := filepath.Join(dir, "fault.key"), filepath.Join(dir, "fault.pub")
	url := "http://ok.fault.test:" + w.httpPort + "/small"

	run := func(name string, stop syscall.Signal) []string {
		in := startEgressd(t, w, "--audit-signing-key", key, "--audit-checkpoint-interval", "100ms")
		for range 3 {
			in.get(t, url)
		}
		in.waitRecords(t, 3, func(r record) bool { return r.Kind == "http" })
		rotated := in.auditFile + ".1"
		if err := os.Rename(in.auditFile, rotated); err != nil {
			t.Fatal(err)
		}
		if err := in.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(readFile(t, in.auditFile), `"trigger":"rotation"`) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no rotation checkpoint in the reopened file", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for range 2 {
			in.get(t, url)
		}
		in.waitRecords(t, 2, func(r record) bool { return r.Kind == "http" })
		if stop == syscall.SIGKILL {
			// Let an interval checkpoint cover the last records first.
			time.Sleep(300 * time.Millisecond)
		}
		if err := in.cmd.Process.Signal(stop); err != nil {
			t.Fatal(err)
		}
		select {
		case <-in.exited:
			in.exited <- nil // for the cleanup
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: egressd did not exit", name)
		}
		if strings.Contains(in.logText(), "PRIVATE") {
			t.Errorf("%s: the operational log holds the signer key", name)
		}
		return []string{rotated, in.auditFile}
	}
	verify := func(args ...string) (int, string) {
		cmd := exec.Command(egressdBin, append([]string{"verify", "--key", pub}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}

	termed := run("SIGTERM", syscall.SIGTERM)
	if code, out := verify(termed...); code != 0 || out != "verified: 5 records in 1 logs\n" {
		t.Errorf("SIGTERM run: exit %d\n%s", code, out)
	}
	killed := run("SIGKILL", syscall.SIGKILL)
	code, out := verify(killed...)
	if code != 0 || !strings.HasPrefix(out, "unterminated log=") || !strings.HasSuffix(out, "\nverified: 5 records in 1 logs\n") {
		t.Errorf("SIGKILL run: exit %d\n%s", code, out)
	}
	if code, out := verify(append([]string{"--strict"}, killed...)...); code != 1 || !strings.HasSuffix(out, "FAILED: 1 findings\n") {
		t.Errorf("SIGKILL run, --strict: exit %d\n%s", code, out)
	}
	if code, out := verify(append(termed, killed...)...); code != 0 || !strings.HasSuffix(out, "verified: 10 records in 2 logs\n") {
		t.Errorf("both runs: exit %d\n%s", code, out)
	}
	secret := strings.TrimSpace(readFile(t, key))
	secret = secret[strings.LastIndexByte(secret, '+')+1:]
	for _, f := range append(termed, killed...) {
		if strings.Contains(readFile(t, f), secret) {
			t.Errorf("the signer key is in %s", f)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}
