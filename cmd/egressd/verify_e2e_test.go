package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run1 runs an egressd command in-process and returns its exit code,
// stdout and stderr.
func run1(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatchIO(context.Background(), args, stdin, &out, &errb)
	return code, out.String(), errb.String()
}

// TestEndToEndVerifiableRecords: egressd run with --audit-signing-key, a
// restart on the same audit file (two logs), GET /audit/checkpoint, then
// egressd verify on the file and on stdout, a proof, report reading the
// signed records, and the signer key in no output.
func TestEndToEndVerifiableRecords(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	if code, _, stderr := run1(t, nil, "keygen", "--name", "e2e", "--out", dir); code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	key, pub := filepath.Join(dir, "e2e.key"), filepath.Join(dir, "e2e.pub")
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("signer key mode: %v %v", st, err)
	}
	if code, _, _ := run1(t, nil, "keygen", "--name", "e2e", "--out", dir); code != 1 {
		t.Errorf("keygen over an existing key: exit %d, want 1", code)
	}
	auditFile := filepath.Join(dir, "audit.jsonl")
	var stdoutCopies []string
	var witness []byte
	for round := range 2 {
		in := startEgressd(t, w, "--audit-signing-key", key, "--audit-file", auditFile, "--audit-checkpoint-interval", "50ms")
		for range 3 {
			in.curl(t, w, "127.0.0.2", "-f", "https://models.test:"+w.port+"/")
			in.curl(t, w, "127.0.0.3", "https://models.test:"+w.port+"/") // denied
		}
		deadline := time.Now().Add(10 * time.Second)
		for witness == nil || round == 1 {
			resp, err := http.Get("http://" + in.metrics + "/audit/checkpoint")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && bytes.HasPrefix(b, []byte("egressd/")) {
				witness = b
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /audit/checkpoint: %d %s", resp.StatusCode, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
		in.stop()
		if code := <-in.done; code != 0 {
			t.Fatalf("exit %d", code)
		}
		in.done <- 0
		stdoutCopies = append(stdoutCopies, in.audit.String())
		if !strings.Contains(in.audit.String(), `"trigger":"exit"`) {
			t.Fatalf("no exit checkpoint on stdout:\n%s", in.audit.String())
		}
		if strings.Contains(in.logs.String(), "PRIVATE") {
			t.Error("the operational log holds the signer key")
		}
	}
	witnessFile := filepath.Join(dir, "witness.txt")
	writeFile(t, witnessFile, string(witness))

	code, out, stderr := run1(t, nil, "verify", "--key", pub, "--checkpoint", witnessFile, auditFile)
	if code != 0 || !strings.HasPrefix(lastLine(out), "verified: ") || !strings.HasSuffix(lastLine(out), " in 2 logs") {
		t.Fatalf("verify the file: exit %d\n%s%s", code, out, stderr)
	}
	code, out2, _ := run1(t, strings.NewReader(strings.Join(stdoutCopies, "")), "verify", "--key", pub, "-")
	if code != 0 || lastLine(out2) != lastLine(out) {
		t.Errorf("verify stdout: exit %d\n%s", code, out2)
	}
	code, jout, _ := run1(t, nil, "verify", "--key", pub, "--json", auditFile)
	var res struct {
		Verified bool `json:"verified"`
		Records  int  `json:"records"`
	}
	if code != 0 || json.Unmarshal([]byte(jout), &res) != nil || !res.Verified || res.Records < 12 {
		t.Errorf("verify --json: exit %d %s", code, jout)
	}

	// The records are read unchanged by report; checkpoints are not requests.
	if code, rout, rerr := run1(t, nil, "report", "--format", "json", auditFile); code != 0 || !strings.Contains(rout, `"checkpoint_records"`) {
		t.Errorf("report: exit %d %s %s", code, rout, rerr)
	}

	// A proof of one record, and the same proof against an altered record.
	data, _ := os.ReadFile(auditFile)
	var first struct{ ID string }
	_ = json.Unmarshal(data[:bytes.IndexByte(data, '\n')], &first)
	code, proof, stderr := run1(t, nil, "verify", "--key", pub, "--prove", first.ID, auditFile)
	if code != 0 {
		t.Fatalf("--prove: exit %d %s", code, stderr)
	}
	proofFile := filepath.Join(dir, "proof.json")
	writeFile(t, proofFile, proof)
	if code, out, _ := run1(t, nil, "verify", "--key", pub, "--check-proof", proofFile); code != 0 || !strings.HasPrefix(out, "verified: ") {
		t.Errorf("--check-proof: exit %d %s", code, out)
	}
	writeFile(t, proofFile, strings.Replace(proof, `\"verdict\":\"allow\"`, `\"verdict\":\"deny\"`, 1))
	if code, out, _ := run1(t, nil, "verify", "--key", pub, "--check-proof", proofFile); code != 1 || !strings.HasPrefix(out, "FAILED: ") {
		t.Errorf("--check-proof of an altered record: exit %d %s", code, out)
	}

	// One byte flipped: altered, named, exit 1.
	altered := filepath.Join(dir, "altered.jsonl")
	writeFile(t, altered, strings.Replace(string(data), `"verdict":"allow"`, `"verdict":"deny!"`, 1))
	if code, out, _ := run1(t, nil, "verify", "--key", pub, altered); code != 1 || !strings.HasPrefix(out, "altered log=") || lastLine(out) != "FAILED: 1 findings" {
		t.Errorf("verify an altered file: exit %d\n%s", code, out)
	}
	// Usage errors: exit 2.
	if code, _, _ := run1(t, nil, "verify", auditFile); code != 2 {
		t.Errorf("verify without --key: exit %d", code)
	}
	if code, _, _ := run1(t, nil, "verify", "--key", key, auditFile); code != 2 {
		t.Errorf("verify with the signer key: exit %d", code)
	}

	// The signer key is in no record, proof or output.
	secret, _ := os.ReadFile(key)
	s := strings.TrimSpace(string(secret))
	for name, text := range map[string]string{"audit file": string(data), "stdout": strings.Join(stdoutCopies, ""), "verify": out + jout, "proof": proof} {
		if strings.Contains(text, s) || strings.Contains(text, s[strings.LastIndexByte(s, '+')+1:]) {
			t.Errorf("the signer key is in the %s", name)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
