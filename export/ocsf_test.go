package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// flatten is the test's own reading of an OCSF event: its JSON, every
// leaf under its dotted path, as the attribute's text.
func flatten(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			flatten(prefix+k+".", x, out)
		}
	case []any:
		b, _ := json.Marshal(v)
		out[prefix[:len(prefix)-1]] = string(b)
	case float64:
		out[prefix[:len(prefix)-1]] = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		out[prefix[:len(prefix)-1]] = fmt.Sprint(v)
	}
}

func attrText(v *commonpb.AnyValue) string {
	if _, ok := v.Value.(*commonpb.AnyValue_IntValue); ok {
		return strconv.FormatInt(v.GetIntValue(), 10)
	}
	return v.GetStringValue()
}

// TestOCSFAttributes: with --audit-otlp-schema ocsf every request kind's
// log record keeps its exact line as the body and carries as attributes
// exactly the leaves of its OCSF event (record.OCSF, report --format
// ocsf's mapping), the empty strings left out; a gap record, which is of
// no request, keeps the OpenTelemetry names.
func TestOCSFAttributes(t *testing.T) {
	rule := 2
	base := record.Record{Time: time.Unix(1782900000, 5), Start: time.Unix(1782899999, 0), ID: "0123456789abcdef0123456789abcdef",
		Client: record.Client{IP: "10.244.1.17", Namespace: "llm-prod", Pod: "llm-0", UID: "u-1", ServiceAccount: "llm",
			Workload: &record.Workload{Kind: "Deployment", Name: "llm"}},
		Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed", Policy: "llm-prod/boot", Rule: &rule,
		Purpose: "model weights", Peer: "203.0.113.10:443", Outcome: "ok", BytesSent: 10, BytesReceived: 20, DurationMS: 12.5}
	recs := map[string]record.Record{}
	connect := base
	connect.Kind = record.KindConnect
	connect.TLS = &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Cipher: "TLS_AES_128_GCM_SHA256"}
	recs["connect"] = connect
	http := base
	http.Kind, http.Verdict, http.Reason = record.KindHTTP, "deny", "not-allowlisted"
	http.HTTP = &record.HTTP{Method: "POST", Status: 403, Proto: "HTTP/1.1"}
	recs["http"] = http
	sni := connect
	sni.Kind = record.KindSNI
	recs["sni"] = sni
	inspected := http
	inspected.Kind, inspected.Tunnel = record.KindInspected, "fedcba9876543210fedcba9876543210"
	recs["inspected"] = inspected
	dns := base
	dns.Kind, dns.Port, dns.Peer, dns.QType = record.KindDNS, 0, "", "A"
	dns.DNS = &record.DNS{Rcode: "NOERROR", Answers: []string{"203.0.113.10"}, TTL: 60, MS: 1.5}
	recs["dns"] = dns

	e, err := newEncoder(SchemaOCSF)
	if err != nil {
		t.Fatal(err)
	}
	for kind, r := range recs {
		t.Run(kind, func(t *testing.T) {
			line, err := record.AppendJSON(nil, &r)
			if err != nil {
				t.Fatal(err)
			}
			body, n := e.encodeWire(append(bytes.Clone(line), '\n'), 1)
			var data logspb.LogsData
			if err := proto.Unmarshal(body, &data); err != nil || n != 1 {
				t.Fatalf("%d records: %v", n, err)
			}
			lr := data.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
			if lr.Body.GetStringValue() != string(line) {
				t.Fatalf("body is not the exact line:\n%s\n%s", lr.Body.GetStringValue(), line)
			}
			got := map[string]string{}
			for _, kv := range lr.Attributes {
				got[kv.Key] = attrText(kv.Value)
			}
			// The event of the record as the export decoded it from the line.
			var back record.Record
			if err := json.Unmarshal(line, &back); err != nil {
				t.Fatal(err)
			}
			ev, _ := json.Marshal(record.OCSF(&back))
			var m map[string]any
			_ = json.Unmarshal(ev, &m)
			want := map[string]string{}
			flatten("", m, want)
			for k, v := range want {
				if v == "" {
					delete(want, k)
				}
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("attribute %s is no leaf of the OCSF event", k)
				}
			}
			if got["class_uid"] == "" || got["src_endpoint.ip"] != "10.244.1.17" || got["unmapped.k8s.namespace.name"] != "llm-prod" {
				t.Errorf("attributes %v lack the class, the pod's address or its namespace", got)
			}
		})
	}
	t.Run("gap record", func(t *testing.T) {
		line := []byte(`{"time":"2026-07-01T10:00:00Z","kind":"gap","sink":"otlp http://127.0.0.1:9428/insert/opentelemetry/v1/logs","records":3,"since":"2026-07-01T09:59:00Z","cause":"spool full"}`)
		body, _ := e.encodeWire(append(bytes.Clone(line), '\n'), 1)
		var data logspb.LogsData
		if err := proto.Unmarshal(body, &data); err != nil {
			t.Fatal(err)
		}
		lr := data.ResourceLogs[0].ScopeLogs[0].LogRecords[0]
		got := map[string]string{}
		for _, kv := range lr.Attributes {
			got[kv.Key] = attrText(kv.Value)
		}
		if got["egressd.kind"] != "gap" || got["class_uid"] != "" || lr.Body.GetStringValue() != string(line) {
			t.Errorf("gap record's attributes %v", got)
		}
	})
}

func TestValidSchema(t *testing.T) {
	for s, ok := range map[string]bool{"": true, "otel": true, "ocsf": true, "OCSF": false, "ecs": false} {
		if err := ValidSchema(s); (err == nil) != ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("ValidSchema(%q) = %v", s, err)
		}
	}
}
