package export

import (
	"fmt"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

// BenchmarkEncode is the sender's cost per record: decoding the line for
// its attributes and marshalling the OTLP request (bench/export.md).
func BenchmarkEncode(b *testing.B) {
	var lines []byte
	rule := 0
	for i := range 1000 {
		r := &record.Record{Time: time.Unix(1782900000, int64(i)), ID: fmt.Sprintf("%032x", i), Kind: record.KindConnect,
			Client: record.Client{IP: "10.244.1.17", Namespace: "llm-prod", Pod: fmt.Sprintf("llm-%d", i%10), ServiceAccount: "llm",
				Workload: &record.Workload{Kind: "Deployment", Name: "llm"}},
			Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed", Policy: "llm-prod/boot", Rule: &rule,
			Peer: "203.0.113.10:443", TLS: &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Result: "established"}, Outcome: "ok"}
		var err error
		if lines, err = record.AppendJSON(lines, r); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, '\n')
	}
	e, err := newEncoder()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(lines)) / 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		if _, _, err := e.encode(lines, 1); err != nil {
			b.Fatal(err)
		}
	}
}
