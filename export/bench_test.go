package export

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// testLines are 1000 record lines of 10 pods.
func testLines(tb testing.TB) []byte {
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
			tb.Fatal(err)
		}
		lines = append(lines, '\n')
	}
	return append(lines, "not a record\n"...)
}

// BenchmarkEncode is the sender's cost per record: decoding the line for
// its attributes and writing the OTLP request, with the protocol types'
// structs and proto.Marshal, and with protowire (bench/export.md). One op
// is one record.
func BenchmarkEncode(b *testing.B) {
	lines := testLines(b)
	for _, c := range []struct {
		name string
		f    func(e *encoder) error
	}{
		{"proto", func(e *encoder) error { _, _, err := e.encode(lines, 1); return err }},
		{"protowire", func(e *encoder) error { e.encodeWire(lines, 1); return nil }},
	} {
		b.Run(c.name, func(b *testing.B) {
			e, err := newEncoder(SchemaOTel)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(lines)) / 1001)
			b.ReportAllocs()
			for i := 0; i < b.N; i += 1001 {
				if err := c.f(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEncodeWireEqual: the protowire encoding is the protocol types'
// message, a line that is no record included, in either schema, also
// from an encoder whose buffers held another request before; the request
// is allocated at its exact size.
func TestEncodeWireEqual(t *testing.T) {
	lines := testLines(t)
	for _, schema := range []string{SchemaOTel, SchemaOCSF} {
		e, err := newEncoder(schema)
		if err != nil {
			t.Fatal(err)
		}
		want, n1, err := e.encode(lines, 7)
		if err != nil {
			t.Fatal(err)
		}
		// Another request first: the last 300 records (other groups' order).
		cut := len(lines)
		for range 301 {
			cut = bytes.LastIndexByte(lines[:cut-1], '\n') + 1
		}
		if _, n := e.encodeWire(lines[cut:], 3); n != 301 {
			t.Fatalf("%s: first request: %d records, want 301", schema, n)
		}
		got, n2 := e.encodeWire(lines, 7)
		if len(got) != cap(got) {
			t.Errorf("%s: request of %d bytes in a buffer of %d: want its exact size", schema, len(got), cap(got))
		}
		var a, b logspb.LogsData
		if err := proto.Unmarshal(want, &a); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(got, &b); err != nil {
			t.Fatalf("%s: protowire output does not parse: %v", schema, err)
		}
		if n1 != n2 || n1 != 1001 || !proto.Equal(&a, &b) {
			t.Fatalf("%s: protowire differs from the protocol types (%d, %d records)", schema, n1, n2)
		}
	}
}
