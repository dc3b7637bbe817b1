package auditlog

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

// readView says, for every member of record.Record (package record, the
// one schema), what the reading view Record does with it: the field it
// decodes into, or why it is skipped. A member added to the schema fails
// TestReadViewCoversSchema until it is decided here (and in decode.go).
var readView = map[string]string{
	"time": "Time", "start": "Start", "event": "Event", "id": "ID", "kind": "Kind",
	"client.ip": "Client.IP", "client.namespace": "Client.Namespace", "client.pod": "Client.Pod",
	"client.serviceAccount": "Client.ServiceAccount", "client.uid": "Client.UID",
	"client.workload.kind": "Client.Workload.Kind", "client.workload.name": "Client.Workload.Name",
	"host": "Host", "port": "Port", "verdict": "Verdict", "would_deny": "WouldDeny", "reason": "Reason",
	"policy": "Policy", "rule": "Rule", "purpose": "Purpose", "owner": "Owner", "mode": "Mode", "probe": "Probe",
	"dns.answers": "Answers", "peer": "Peer",
	"tls.result": "TLSResult", "tls.version": "TLSVersion",
	"http.status": "HTTPStatus", "http.redirect_host": "RedirectHost",
	"bytes_sent": "BytesSent", "bytes_received": "BytesReceived", "duration_ms": "DurationMS",
	"outcome": "Outcome", "count": "Count",
	"tunnel": "Tunnel", "tls.inspected": "TLSInspected", "requests": "InspectedRequests",

	"qtype":                     "skipped: reports group DNS by name, not type",
	"dns.cnames":                "skipped: the chain is the resolver's concern",
	"dns.ttl":                   "skipped",
	"dns.rcode":                 "skipped: the verdict and outcome say it",
	"dns.ms":                    "skipped",
	"dns.cached":                "skipped",
	"dns.stale":                 "skipped",
	"dns.upstream":              "skipped",
	"tls.sni":                   "skipped: host is the decided name",
	"tls.cipher":                "skipped",
	"tls.alpn":                  "skipped",
	"tls.client_alpn":           "skipped",
	"tls.ech":                   "skipped: the reason ech says a refusal",
	"http.method":               "skipped",
	"http.path":                 "skipped: off by default, and may hold tokens",
	"error":                     "skipped: free text",
	"http.proto":                "skipped",
	"tls.origin_cert.subject":   "skipped: the certificate is the tunnel's evidence, not a report's",
	"tls.origin_cert.issuer":    "skipped",
	"tls.origin_cert.not_after": "skipped",
}

// schemaKeys lists the JSON members of t, nested ones as "parent.child".
func schemaKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			keys = append(keys, schemaKeys(ft, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// TestReadViewCoversSchema: every member of the schema is decoded or
// skipped on purpose, every decoded one names a field of the view, and
// readView names no member the schema lacks.
func TestReadViewCoversSchema(t *testing.T) {
	keys := schemaKeys(reflect.TypeFor[record.Record](), "")
	for _, k := range keys {
		field, ok := readView[k]
		switch {
		case !ok:
			t.Errorf("record.Record member %q: decode it into Record (decode.go) or skip it, and say which in readView", k)
		case !strings.HasPrefix(field, "skipped"):
			v := reflect.ValueOf(Record{})
			for _, part := range strings.Split(field, ".") {
				if v = v.FieldByName(part); !v.IsValid() {
					t.Errorf("readView[%q] = %q: no such field of Record", k, field)
					break
				}
			}
		}
	}
	for k := range readView {
		if !slices.Contains(keys, k) {
			t.Errorf("readView names %q, which record.Record does not have", k)
		}
	}
}
