package report

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// FuzzRender: whatever a record holds, every format renders it, the table
// stays within 100 columns, the CSV stays rectangular and the HTML page
// carries no markup from the record.
func FuzzRender(f *testing.F) {
	f.Add("models.example.com", "llm-prod", "llm-0", "not-allowlisted", "10.0.0.1:443", int64(3), int64(1<<40), 443)
	f.Add("<script>x</script>", "ns|x", "p\n,\"", "r\u2028", "[::1]:1", int64(-1), int64(-5), 0)
	f.Add(strings.Repeat("é", 200), strings.Repeat("n", 120), "", "metadata", "", int64(1<<62), int64(0), 65535)
	f.Fuzz(func(t *testing.T, host, ns, pod, reason, peer string, count, bytes int64, port int) {
		start := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
		rec := &record.Record{Time: start.Add(time.Second), Start: start, ID: "0123456789abcdef", Kind: record.KindConnect,
			Client: record.Client{IP: "127.0.0.17", Namespace: ns, Pod: pod, Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
			Host:   host, Port: port, Verdict: "allow", WouldDeny: true, Reason: reason, Peer: peer,
			TLS: &record.TLS{Result: "established"}, Count: count, BytesReceived: bytes}
		line, err := json.Marshal(rec)
		if err != nil {
			return
		}
		rep, err := Build(Config{}, []auditlog.Input{{Name: "fuzz", Open: func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(string(line) + "\n")), nil
		}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range Formats {
			var out strings.Builder
			if err := Render(&out, rep, format); err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			switch format {
			case "table":
				for _, l := range strings.Split(out.String(), "\n") {
					if n := utf8.RuneCountInString(l); n > tableWidth {
						t.Errorf("table line of %d columns: %q", n, l)
					}
				}
			case "csv":
				rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
				if err != nil || len(rows) < 2 {
					t.Errorf("csv: %v", err)
				}
			case "html":
				if strings.Count(out.String(), "<script") > 0 || strings.Count(out.String(), "<svg") != 1 {
					t.Errorf("html carries markup from the record")
				}
			}
		}
	})
}
