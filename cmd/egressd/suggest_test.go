package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// unrelatedPolicy selects no pod of the test: in audit mode every request
// of llm-0 is allowed with would_deny.
const unrelatedPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: other, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: other}}
  egress:
  - hosts: [api.test]
    ports: [443]
`

// TestEndToEndSuggest is the operator's path of issue 8: egressd in audit
// mode with an unrelated policy, curl downloads through the redirect,
// suggest turns the records into a policy that names the blob host as the
// redirect target, check accepts it, and egressd in enforce mode with it
// lets the same download through.
func TestEndToEndSuggest(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	unrelated := filepath.Join(dir, "unrelated.yaml")
	writeFile(t, unrelated, unrelatedPolicy)
	pods := filepath.Join(dir, "pods.yaml")
	writeFile(t, pods, e2ePods)
	url := "https://models.test:" + w.port + "/weights.bin"

	audit := startEgressdArgs(t, w, "--policy", unrelated, "--pods", pods, "--mode", "audit")
	code, body, stderr := audit.curl(t, w, "127.0.0.2", "-fL", url)
	if code != 0 || len(body) != 100000 {
		t.Fatalf("download in audit mode: curl exit %d, %d bytes, %s", code, len(body), stderr)
	}
	audit.waitRecord(t, "of the blob host", func(r map[string]any) bool {
		return r["host"] == "eu1.blob.test" && r["would_deny"] == true && r["event"] == "end"
	})
	// The metadata address, refused in audit mode too, is never suggested.
	audit.curl(t, w, "127.0.0.2", "-o", "/dev/null", "http://169.254.169.254/latest/meta-data/")
	audit.waitRecord(t, "of the metadata request", hostIs("http", "169.254.169.254", "deny"))
	records := filepath.Join(dir, "audit.jsonl")
	writeFile(t, records, audit.audit.String())

	// Without --guess-redirects no purpose is a guess by timing.
	code, yaml, stderr := runCmd(t, "", "suggest", "--pods", pods, "--cidr", "127.0.0.0/8", records)
	if code != 0 || strings.Contains(yaml, "redirect target of") {
		t.Fatalf("suggest: exit %d: %s%s", code, yaml, stderr)
	}
	code, yaml, stderr = runCmd(t, "", "suggest", "--guess-redirects", "--pods", pods, "--cidr", "127.0.0.0/8", records)
	if code != 0 {
		t.Fatalf("suggest: exit %d: %s", code, stderr)
	}
	t.Logf("suggested:\n%s", yaml)
	for _, want := range []string{
		`name: "llm-0-suggested"`,
		`"app": "llm-server"`,
		`serviceAccountNames: ["llm-server"]`,
		`- hosts: ["models.test"]`,
		`cidrs: ["127.0.0.0/8"]`,
		`owner: "TODO"`,
		"reason metadata: 1",
	} {
		if !strings.Contains(yaml, want) {
			t.Errorf("suggestion lacks %q", want)
		}
	}
	blob := strings.Index(yaml, `- hosts: ["eu1.blob.test"]`)
	if blob < 0 {
		blob = strings.Index(yaml, `- hosts: ["**.blob.test"]`)
	}
	if blob < 0 || !strings.Contains(yaml[blob:], `purpose: "redirect target of models.test?"`) {
		t.Errorf("the blob host is not suggested as the redirect target of models.test")
	}
	if strings.Contains(yaml, "169.254.169.254") && !strings.Contains(yaml, "# Requests never suggested") {
		t.Error("the metadata address made it into a rule")
	}
	suggested := filepath.Join(dir, "suggested.yaml")
	writeFile(t, suggested, yaml)

	code, out, stderr := runCmd(t, "", "check", "--policy", suggested, "--pods", pods)
	if code != 0 || !strings.Contains(out, "ok: 1 policies") || strings.Contains(out, "warning:") {
		t.Fatalf("check: exit %d: %s%s", code, out, stderr)
	}

	// The report of the same records draws the map.
	code, html, stderr := runCmd(t, "", "report", "--format", "html", records)
	if code != 0 || !strings.Contains(html, "eu1.blob.test") || !strings.Contains(html, `class="edge would-deny"`) {
		t.Errorf("report: exit %d: %s", code, stderr)
	}

	enforce := startEgressdArgs(t, w, "--policy", unrelated, "--policy", suggested, "--pods", pods, "--mode", "enforce")
	code, body, stderr = enforce.curl(t, w, "127.0.0.2", "-fL", url)
	if code != 0 || len(body) != 100000 {
		t.Fatalf("download in enforce mode with the suggested policy: curl exit %d, %d bytes, %s\naudit:\n%s", code, len(body), stderr, enforce.audit.String())
	}
	blobRec := enforce.waitRecord(t, "allowing the blob host", hostIs("connect", "eu1.blob.test", "allow"))
	if blobRec["would_deny"] != false || blobRec["policy"] != "llm-prod/llm-0-suggested" {
		t.Errorf("blob record %v", blobRec)
	}
	// Nothing else opened: another host stays denied.
	if code, _, _ := enforce.curl(t, w, "127.0.0.2", "-f", "https://exfil.test:"+w.port+"/"); code == 0 {
		t.Error("exfil.test allowed by the suggestion")
	}
}

func TestSuggestCommand(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"documentation addresses are private: left out", []string{"suggest", "--namespace", "llm-staging", fixtures + "kubectl-logs.txt"}, 0,
			"# Left out: llm-staging Deployment/chat-ui: cdn.assets.example:443: resolved only to private addresses (203.0.113.50)"},
		{"--cidr opens them", []string{"suggest", "--namespace", "llm-staging", "--cidr", "203.0.113.0/24", fixtures + "kubectl-logs.txt"}, 0,
			"- hosts: [\"cdn.assets.example\"]\n      ports: [443]\n      cidrs: [\"203.0.113.0/24\"]"},
		{"nothing to suggest", []string{"suggest", "--namespace", "nowhere", fixtures + "kubectl-logs.txt"}, 0, "0 policies"},
		{"fold 1", []string{"suggest", "--fold", "1", fixtures + "kubectl-logs.txt"}, 2, ""},
		{"bad cidr", []string{"suggest", "--cidr", "10.0.0.1", fixtures + "kubectl-logs.txt"}, 2, ""},
		{"public cidr", []string{"suggest", "--cidr", "8.8.8.0/24", fixtures + "kubectl-logs.txt"}, 2, ""},
		{"missing pods file", []string{"suggest", "--pods", "no/such/pods.yaml", fixtures + "kubectl-logs.txt"}, 1, ""},
		{"missing input", []string{"suggest", "no/such/file"}, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d (want %d), stdout lacks %q:\n%s%s", code, tc.code, tc.want, out, stderr)
			}
		})
	}
}
