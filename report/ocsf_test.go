package report

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// ocsfRecord is a record of kind with every member its kind can carry.
func ocsfRecord(kind string) *record.Record {
	rule := 2
	t := time.Date(2026, 7, 1, 10, 0, 1, 0, time.UTC)
	r := &record.Record{Time: t, Start: t.Add(-time.Second), Event: "end", ID: "id-" + kind, Kind: kind,
		Client: record.Client{IP: "10.244.1.17", Namespace: "llm-prod", Pod: "llm-0", ServiceAccount: "llm", UID: "u-1",
			Workload: &record.Workload{Kind: "Deployment", Name: "llm"}},
		Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed", Policy: "llm-prod/boot", Rule: &rule,
		Purpose: "weights", Mode: "enforce", Probe: "p", Peer: "203.0.113.10:443", BytesSent: 10, BytesReceived: 20,
		DurationMS: 1000, Outcome: "upstream-error", Error: "connection reset"}
	switch kind {
	case record.KindDNS:
		r.Port, r.Peer, r.QType = 0, "", "A"
		r.DNS = &record.DNS{Answers: []string{"203.0.113.10"}, TTL: 30, Rcode: "NOERROR", MS: 1.5}
	case record.KindHTTP, record.KindInspected:
		r.HTTP = &record.HTTP{Method: "GET", Path: "/v1/models", Status: 200, Proto: "HTTP/1.1"}
		if kind == record.KindInspected {
			r.Tunnel = "id-tunnel"
			r.TLS = &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Cipher: "TLS_AES_128_GCM_SHA256", Result: "established", Inspected: true}
		}
	default:
		r.TLS = &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Cipher: "TLS_AES_128_GCM_SHA256", Result: "established"}
	}
	return r
}

// paths flattens an event to its attribute paths ("a.b", "answers[].rdata").
func paths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			paths(p, c, out)
		}
	case []any:
		for _, c := range v {
			paths(prefix+"[]", c, out)
		}
	default:
		out[prefix] = true
	}
}

// mappingRows reads the attribute table of docs/reports.md: the
// backquoted names of its first column.
func mappingRows(t *testing.T) map[string]bool {
	b, err := os.ReadFile("../docs/reports.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "| OCSF attribute | from the record |")
	if !ok {
		t.Fatal("docs/reports.md has no OCSF attribute table")
	}
	sec, _, _ = strings.Cut(sec, "\n\n")
	rows := map[string]bool{}
	name := regexp.MustCompile("`([^`]+)`")
	for l := range strings.Lines(sec) {
		cols := strings.Split(l, "|")
		if len(cols) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			rows[m[1]] = true
		}
	}
	return rows
}

// TestOCSFMapping: every record kind maps to its class and activity, and
// the attributes its event carries are exactly the rows of the mapping
// table in docs/reports.md (together over the kinds).
func TestOCSFMapping(t *testing.T) {
	rows := mappingRows(t)
	carried := map[string]bool{}
	for _, c := range []struct {
		kind            string
		class, activity int
	}{
		{record.KindConnect, 4002, 1}, {record.KindHTTP, 4002, 3}, {record.KindSNI, 4002, 1},
		{record.KindInspected, 4002, 3}, {record.KindDNS, 4003, 6},
	} {
		t.Run(c.kind, func(t *testing.T) {
			b, err := json.Marshal(OCSFEvent(ocsfRecord(c.kind)))
			if err != nil {
				t.Fatal(err)
			}
			var ev map[string]any
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			if ev["class_uid"] != float64(c.class) || ev["activity_id"] != float64(c.activity) || ev["type_uid"] != float64(c.class*100+c.activity) {
				t.Fatalf("class %v activity %v type %v, want %d %d", ev["class_uid"], ev["activity_id"], ev["type_uid"], c.class, c.activity)
			}
			ps := map[string]bool{}
			paths("", ev, ps)
			for p := range ps {
				carried[p] = true
				if !rows[p] {
					t.Errorf("%s carries %s, which the mapping table of docs/reports.md lacks", c.kind, p)
				}
			}
		})
	}
	var unused []string
	for r := range rows {
		if !carried[r] {
			unused = append(unused, r)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("rows of the mapping table no kind carries: %v", unused)
	}
}

// TestOCSFDisposition: the verdict sets disposition and action, the
// outcome the status.
func TestOCSFDisposition(t *testing.T) {
	r := ocsfRecord(record.KindConnect)
	r.Verdict, r.Reason, r.Outcome = "deny", "metadata", "refused"
	ev := OCSFEvent(r)
	if ev["disposition_id"] != 2 || ev["action_id"] != 2 || ev["status_id"] != 2 || ev["status_code"] != "metadata" {
		t.Fatalf("denied: %v", ev)
	}
	r.Verdict, r.Reason, r.Outcome = "allow", "allowed", "ok"
	ev = OCSFEvent(r)
	if ev["disposition_id"] != 1 || ev["action_id"] != 1 || ev["status_id"] != 1 {
		t.Fatalf("allowed: %v", ev)
	}
}

// TestWriteOCSF: one event per request id over the testdata, the
// duplicates of a second replica's copy collapsed.
func TestWriteOCSF(t *testing.T) {
	ins, err := auditlog.Inputs([]string{"testdata/egressd-a.audit.jsonl", "testdata/egressd-a.audit.jsonl"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := WriteOCSF(&out, Config{}, ins)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for l := range strings.Lines(out.String()) {
		var ev struct {
			Metadata struct{ UID string } `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.Metadata.UID)
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(ids) || int64(len(ids)) != st.Records-st.Duplicates-st.Interim-st.Probes {
		t.Fatalf("%d events (%d distinct) for %+v", len(ids), len(slices.Compact(sorted)), st)
	}
}
