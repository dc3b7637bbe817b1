package report

import (
	"io"
	"strings"
	"testing"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
)

// TestUnusedRulesFollowRuleNames: records written under one generation of
// a policy, then the policy edited to insert a rule before a named one:
// the named rule is still counted as used (its index moved, its name did
// not), and only the inserted rule is unused.
func TestUnusedRulesFollowRuleNames(t *testing.T) {
	before := `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {}
  egress:
  - name: models
    hosts: [models.example.com]
    ports: [443]
`
	after := strings.Replace(before, "  - name: models", "  - name: telemetry\n    hosts: [otel.example.com]\n    ports: [4317]\n  - name: models", 1)
	load := func(y string) *policy.Snapshot {
		t.Helper()
		s, err := policy.Load([]policy.Source{{Name: "llm.yaml", Data: []byte(y)}}, policy.ValidateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old, edited := load(before), load(after)
	c := &policy.Client{Namespace: "llm-prod", Pod: "p-0", Labels: map[string]string{}}
	d := old.Decide(policy.DecideArgs{Client: c, Host: "models.example.com", Port: 443, Mode: policy.ModeEnforce})
	if d.RuleName != "models" || d.Rule != 0 || d.PolicyGeneration == "" {
		t.Fatalf("decision %+v: want rule 0 named models with a generation", d)
	}
	if d2 := edited.Decide(policy.DecideArgs{Client: c, Host: "models.example.com", Port: 443}); d2.Rule != 1 || d2.PolicyGeneration == d.PolicyGeneration {
		t.Fatalf("edited decision %+v: want rule 1 and a generation other than %s", d2, d.PolicyGeneration)
	}
	rec := `{"time":"2026-12-01T10:00:00Z","start":"2026-12-01T10:00:00Z","id":"r1","kind":"connect","client":{"ip":"127.0.0.7","namespace":"llm-prod","pod":"p-0"},"host":"models.example.com","port":443,"verdict":"allow","would_deny":false,"reason":"allowed","policy":"llm-prod/llm","rule":0,"rule_name":"models","policy_generation":"` + d.PolicyGeneration + `","bytes_sent":1,"bytes_received":1,"duration_ms":1}`
	in := []auditlog.Input{{Name: "audit.log", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(strings.Repeat(rec+"\n", 4))), nil
	}}}
	rep, err := Build(Config{Policies: edited.Policies()}, in)
	if err != nil {
		t.Fatal(err)
	}
	var unused []string
	for _, u := range rep.Summary.UnusedRules {
		unused = append(unused, u.ID())
	}
	if len(unused) != 1 || unused[0] != "llm-prod/llm#telemetry" {
		t.Fatalf("unused rules %v, want only llm-prod/llm#telemetry", unused)
	}
}
