package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/report"
)

const fixtures = "../../report/testdata/"

// runCmd runs the CLI in-process with stdin and returns exit code, stdout
// and stderr.
func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatchIO(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportCommand(t *testing.T) {
	logs, err := os.ReadFile(fixtures + "kubectl-logs.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		env   map[string]string
		code  int
		check func(t *testing.T, rep *report.Report, stdout, stderr string)
	}{
		{name: "kubectl logs on stdin, both replicas' files, flags after inputs", stdin: string(logs),
			args: []string{"report", "-", fixtures + "egressd-a.audit.jsonl", "--format", "json"},
			check: func(t *testing.T, rep *report.Report, _, _ string) {
				if rep.Input.Inputs != 2 || rep.Input.Duplicates != 5 || rep.Input.Open != 1 || rep.Summary.Workloads != 4 {
					t.Errorf("input %+v, %d workloads", rep.Input, rep.Summary.Workloads)
				}
			}},
		{name: "a directory is every file in it", args: []string{"report", "--format=json", "--policy", fixtures + "policies.yaml", fixtures},
			check: func(t *testing.T, rep *report.Report, _, _ string) {
				// testdata holds the logs (32 records, 3 of them exchanges inside inspected tunnels), the policies (no records) and the goldens (no records).
				if rep.Input.Records != 32 || rep.Input.Duplicates != 5 || len(rep.Summary.UnusedRules) != 2 {
					t.Errorf("input %+v, unused %+v", rep.Input, rep.Summary.UnusedRules)
				}
			}},
		{name: "filters", args: []string{"report", "--format", "json", "--namespace", "llm-prod", "--workload", "deployment/llm-server",
			"--verdict", "deny", "--since", "2026-07-01T10:00:40Z", "--until", "2026-07-01T10:00:59Z", fixtures + "kubectl-logs.txt"},
			check: func(t *testing.T, rep *report.Report, _, _ string) {
				if len(rep.Workloads) != 1 || rep.Summary.Requests != 27 || len(rep.UnknownClients) != 0 {
					t.Errorf("%d workloads, %+v", len(rep.Workloads), rep.Summary.Counts)
				}
			}},
		{name: "--since as a duration back from now", args: []string{"report", "--format", "json", "--since", "1h", fixtures + "kubectl-logs.txt"},
			check: func(t *testing.T, rep *report.Report, _, _ string) {
				if rep.Summary.Requests != 0 || rep.Input.Filtered != 17 {
					t.Errorf("records of 2026-07-01 counted: %+v", rep.Input)
				}
			}},
		{name: "format from the environment", args: []string{"report", fixtures + "kubectl-logs.txt"}, env: map[string]string{"EGRESSD_FORMAT": "dot"},
			check: func(t *testing.T, _ *report.Report, stdout, _ string) {
				if !strings.Contains(stdout, "digraph egress {") {
					t.Errorf("not dot: %.200s", stdout)
				}
			}},
		{name: "html", args: []string{"report", "--format", "html", fixtures + "kubectl-logs.txt"},
			check: func(t *testing.T, _ *report.Report, stdout, _ string) {
				if !strings.Contains(stdout, "<svg") || !strings.Contains(stdout, "default-src 'none'") {
					t.Errorf("no svg or no CSP")
				}
			}},
		{name: "unknown format", args: []string{"report", "--format", "pdf", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "bad workload", args: []string{"report", "--workload", "llm-server", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "bad verdict", args: []string{"report", "--verdict", "maybe", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "bad since", args: []string{"report", "--since", "last tuesday", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "until before since", args: []string{"report", "--since", "2026-07-02", "--until", "2026-07-01", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "--kube without --namespace", args: []string{"report", "--kube", fixtures + "kubectl-logs.txt"}, code: 2},
		{name: "missing file", args: []string{"report", "no/such/file"}, code: 1},
		{name: "broken policy", args: []string{"report", "--policy", fixtures + "egressd-a.audit.jsonl", fixtures + "kubectl-logs.txt"}, code: 1},
		{name: "help", args: []string{"report", "-h"}, code: 0},
		// Issue 23: a clean-looking page of nothing was exit 0.
		{name: "no line is a record", stdin: "not json\n{\"level\":\"INFO\",\"msg\":\"serving\"}\n", args: []string{"report", "-"}, code: 1,
			check: func(t *testing.T, _ *report.Report, stdout, stderr string) {
				if stdout != "" || !strings.Contains(stderr, "2 of 2 lines were not audit records") || !strings.Contains(stderr, "no line of the input is an audit record") {
					t.Errorf("stdout %q stderr %q", stdout, stderr)
				}
			}},
		{name: "unreadable lines beside records are counted", stdin: string(logs) + "not json\n", args: []string{"report", "--format", "json", "-"},
			check: func(t *testing.T, rep *report.Report, _, stderr string) {
				if !strings.Contains(stderr, " lines were not audit records (skipped)") || rep.Input.Skipped == 0 {
					t.Errorf("stderr %q, input %+v", stderr, rep.Input)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if tc.check == nil {
				return
			}
			var rep report.Report
			if strings.HasPrefix(strings.TrimSpace(stdout), "{") {
				if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
					t.Fatal(err)
				}
			}
			tc.check(t, &rep, stdout, stderr)
		})
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 7, 8, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"24h", now.Add(-24 * time.Hour), true},
		{"7d", now.Add(-7 * 24 * time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"2026-07-01", time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), true},
		{"2026-07-01T10:00", time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC), true},
		{"2026-07-01T10:00:00+02:00", time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC), true},
		{"-1h", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"", time.Time{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseWhen(tc.in, now)
			if (err == nil) != tc.ok || !got.Equal(tc.want) {
				t.Errorf("%v %v, want %v", got, err, tc.want)
			}
		})
	}
}

// TestReportKube: --kube reads the namespace's EgressPolicies from a real
// API server and lists the rules no record matched.
func TestReportKube(t *testing.T) {
	env := k8stest.Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	data, err := os.ReadFile(fixtures + "policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(strings.ReplaceAll(doc, "namespace: llm-prod", "namespace: "+ns)), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The fixture logs, moved to the test's namespace.
	logs, err := os.ReadFile(fixtures + "egressd-a.audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	moved := strings.ReplaceAll(string(logs), `llm-prod`, ns)
	if err := os.WriteFile(path, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "", "report", "--kube", "--kubeconfig", env.Kubeconfig(t), "--namespace", ns, "--format", "json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range rep.Summary.UnusedRules {
		got = append(got, strings.TrimPrefix(u.Policy, ns+"/")+"#"+itoa(u.Rule)+" "+strings.Join(u.Hosts, ","))
	}
	want := []string{"llm-api#0 api.fallback.example", "llm-bootstrap#2 registry.corp.internal"}
	if rep.Summary.PoliciesChecked != 3 || strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("%d policies checked, unused %q, want %q", rep.Summary.PoliciesChecked, got, want)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
