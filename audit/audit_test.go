package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

func TestRedactPath(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"signed url", "https://blob.example.net/w.bin?sig=SECRET&se=2026", "/w.bin"},
		{"userinfo", "https://user:pass@models.example.com/x", "/x"},
		{"fragment", "http://a.example/p#token=SECRET", "/p"},
		{"plain", "http://a.example/p", "/p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := RedactPath(u); got != tc.want {
				t.Errorf("RedactPath = %q, want %q", got, tc.want)
			}
		})
	}
	if RedactPath(nil) != "" {
		t.Error("nil URL")
	}
}

func TestRedactText(t *testing.T) {
	cases := []struct{ name, in string }{
		{"query in error", `Get "https://blob.example.net/w.bin?sig=SECRET": dial tcp: refused`},
		{"userinfo in error", `Get "https://user:SECRET@models.example.com/": EOF`},
		{"fragment", `parse "http://a.example/#SECRET": bad`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RedactText(tc.in)
			if strings.Contains(got, "SECRET") {
				t.Errorf("RedactText(%q) = %q", tc.in, got)
			}
			if !strings.Contains(got, "example") {
				t.Errorf("RedactText dropped the host: %q", got)
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestLoggerWritesOneLinePerRecord(t *testing.T) {
	var a, b bytes.Buffer
	m := metrics.New()
	now := time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)
	l := New(Config{Writers: []io.Writer{&a, &b}, Metrics: m, Now: func() time.Time { return now }})
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &record.Record{Kind: record.KindConnect, Client: ClientOf(netip.MustParseAddr("::ffff:10.244.0.7"),
				&policy.Client{Namespace: "llm-prod", Pod: "llm-0", ServiceAccount: "llm-server"}), Host: "models.example.com", Port: 443}
			r.SetDecision(policy.Decision{Verdict: policy.Allow, Reason: policy.ReasonAllowed, Policy: "llm-prod/p", Rule: 0})
			l.Write(r)
		}()
	}
	wg.Wait()
	if a.String() != b.String() {
		t.Fatal("writers got different bytes")
	}
	lines := strings.Split(strings.TrimSpace(a.String()), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	ids := map[string]bool{}
	for _, line := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids[r["id"].(string)] = true
		if r["time"] != "2026-11-30T01:02:03.000456789Z" {
			t.Errorf("time %v", r["time"])
		}
		if r["rule"] != float64(0) || r["verdict"] != "allow" || r["would_deny"] != false {
			t.Errorf("decision fields %v", r)
		}
		c := r["client"].(map[string]any)
		if c["ip"] != "10.244.0.7" || c["serviceAccount"] != "llm-server" {
			t.Errorf("client %v", c)
		}
	}
	if len(ids) != 50 {
		t.Errorf("%d unique ids, want 50", len(ids))
	}
	if got := testCounter(m.AuditWritten); got != 50 {
		t.Errorf("written counter %v", got)
	}

	bad := New(Config{Writers: []io.Writer{failWriter{}}, Metrics: m})
	bad.Write(&record.Record{Kind: record.KindDNS})
	if got := testCounter(m.AuditFailed); got != 1 {
		t.Errorf("failed counter %v", got)
	}
}

func TestSetDecisionWithoutRule(t *testing.T) {
	r := &record.Record{}
	var snap *policy.Snapshot
	c := &policy.Client{Namespace: "ns"}
	r.SetDecision(snap.Decide(policy.DecideArgs{Client: c, Host: "a.example.com", Port: 443, Mode: policy.ModeAudit}))
	if r.Rule != nil || r.Verdict != "allow" || !r.WouldDeny || r.Reason != "not-allowlisted" {
		t.Errorf("%+v", r)
	}
	r.SetDecision(snap.Decide(policy.DecideArgs{Client: c, Host: "metadata.goog", Port: 80, Mode: policy.ModeAudit}))
	if r.Verdict != "deny" || r.WouldDeny {
		t.Errorf("metadata softened in audit mode: %+v", r)
	}
}
