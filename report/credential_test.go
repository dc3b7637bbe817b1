package report

import (
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// TestCredentialCounts: a destination counts its requests per credential
// (http.credential), added or refused credential-unavailable; the table
// shows them.
func TestCredentialCounts(t *testing.T) {
	start := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	var lines []byte
	for i, c := range []struct{ reason, verdict, cred string }{
		{"allowed", "allow", "openai"}, {"allowed", "allow", "openai"},
		{"credential-unavailable", "deny", "openai"}, {"path-not-allowed", "deny", ""},
	} {
		r := record.Record{Time: start.Add(time.Second), Start: start, ID: "r" + string(rune('a'+i)), Kind: record.KindInspected,
			Client: record.Client{IP: "10.0.0.1", Namespace: "prod", Pod: "llm-0", Workload: &record.Workload{Kind: "Deployment", Name: "llm"}},
			Host:   "api.openai.com", Port: 443, Verdict: c.verdict, Reason: c.reason,
			HTTP: &record.HTTP{Method: "POST", Status: 200, Credential: c.cred, CredentialReplaced: true}}
		var err error
		if lines, err = record.AppendJSON(lines, &r); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, '\n')
	}
	rd, err := auditlog.NewReader(1, Unread...)
	if err != nil {
		t.Fatal(err)
	}
	agg := NewAggregator(Config{}, &rd.Stats)
	if err := rd.ReadStream(strings.NewReader(string(lines)), agg.Add); err != nil {
		t.Fatal(err)
	}
	rep := agg.Report()
	if len(rep.Workloads) != 1 || len(rep.Workloads[0].Destinations) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := rep.Workloads[0].Destinations[0].Credentials; len(got) != 1 || got["openai"] != 3 {
		t.Fatalf("credentials %v; want openai 3", got)
	}
	var b strings.Builder
	if err := Render(&b, rep, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "credentials openai=3") {
		t.Fatalf("table:\n%s", b.String())
	}
}
