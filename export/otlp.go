package export

import (
	"bytes"
	"net"
	"strconv"
	"strings"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

// scopeName is the instrumentation scope of every log record.
const scopeName = "github.com/egressd/egressd/audit"

// encoder turns batches of record lines into OTLP requests. It is not
// safe for concurrent use (the sender owns one).
type encoder struct {
	dec  *auditlog.Decoder
	rec  record.Record
	wire wireBufs
	ocsf bool // SchemaOCSF: attributes named after OCSF's (ocsf.go)
}

func newEncoder(schema string) (*encoder, error) {
	// Members no attribute uses are left undecoded (OCSF maps the answers
	// and the rule's purpose).
	skip := []string{"dns.cnames", "tls.client_alpn", "tls.origin_cert", "owner"}
	if schema != SchemaOCSF {
		skip = append(skip, "dns.answers", "purpose")
	}
	d, err := auditlog.NewDecoder(skip...)
	if err != nil {
		return nil, err
	}
	return &encoder{dec: d, ocsf: schema == SchemaOCSF}, nil
}

// resourceKey groups records by the pod that made them: one ResourceLogs
// per pod in a request.
type resourceKey struct{ ns, pod, uid, sa, wkind, wname string }

// encode returns the ExportLogsServiceRequest of lines (whole JSON lines,
// each ending in '\n') and how many records it holds. A line that does not
// decode as a record is still sent, its body the line and no attributes:
// the engine keeps every byte the audit log had. The request is encoded as
// logs.v1.LogsData, whose field 1 (resource_logs) is the request's field 1
// on the wire: the collector package's types would link gRPC.
func (e *encoder) encode(lines []byte, observed uint64) ([]byte, int, error) {
	var (
		data   logspb.LogsData
		groups = map[resourceKey]*logspb.ScopeLogs{}
		n      int
	)
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 {
			i = len(lines) // a spool's torn last line has no newline
		}
		line := lines[:i]
		lines = lines[min(i+1, len(lines)):]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		n++
		lr := &logspb.LogRecord{
			ObservedTimeUnixNano: observed,
			SeverityNumber:       logspb.SeverityNumber_SEVERITY_NUMBER_INFO,
			SeverityText:         "INFO",
			Body:                 &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: string(line)}},
		}
		var key resourceKey
		if err := e.dec.Decode(line, &e.rec); err == nil {
			r := &e.rec
			if !r.Time.IsZero() {
				lr.TimeUnixNano = uint64(r.Time.UnixNano())
			}
			if r.Verdict == "deny" {
				lr.SeverityNumber, lr.SeverityText = logspb.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
			}
			lr.Attributes = e.attributes(r)
			key = resourceKey{ns: r.Client.Namespace, pod: r.Client.Pod, uid: r.Client.UID, sa: r.Client.ServiceAccount}
			if w := r.Client.Workload; w != nil {
				key.wkind, key.wname = w.Kind, w.Name
			}
		}
		sl := groups[key]
		if sl == nil {
			sl = &logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Name: scopeName}}
			groups[key] = sl
			data.ResourceLogs = append(data.ResourceLogs, &logspb.ResourceLogs{
				Resource:  &resourcepb.Resource{Attributes: resourceAttributes(key)},
				ScopeLogs: []*logspb.ScopeLogs{sl},
			})
		}
		sl.LogRecords = append(sl.LogRecords, lr)
	}
	b, err := proto.Marshal(&data)
	return b, n, err
}

// attrs takes attributes: the protocol types (protoAttrs) or protobuf
// wire bytes (wireAttrs, wire.go). The mapping below is written once for
// both.
type attrs interface {
	str(k, v string)
	int(k string, v int64)
}

type protoAttrs struct{ kv []*commonpb.KeyValue }

func (a *protoAttrs) str(k, v string) {
	if v != "" {
		a.kv = append(a.kv, &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}})
	}
}

func (a *protoAttrs) int(k string, v int64) {
	a.kv = append(a.kv, &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}})
}

func resourceAttributes(k resourceKey) []*commonpb.KeyValue {
	var a protoAttrs
	putResource(&a, k)
	return a.kv
}

func (e *encoder) attributes(r *record.Record) []*commonpb.KeyValue {
	a := protoAttrs{kv: make([]*commonpb.KeyValue, 0, 16)}
	e.put(&a, r)
	return a.kv
}

// put writes a record's attributes by the encoder's schema.
func (e *encoder) put(a attrs, r *record.Record) {
	if e.ocsf && record.IsRequest(r.Kind) {
		putOCSF(a, "", record.OCSF(r))
		return
	}
	putRecord(a, r)
}

// putResource names the client pod by the Kubernetes resource
// conventions (k8s.namespace.name, k8s.pod.name, k8s.pod.uid,
// k8s.deployment.name, …). The service account has no convention:
// egressd.client.service_account.
func putResource(a attrs, k resourceKey) {
	a.str("k8s.namespace.name", k.ns)
	a.str("k8s.pod.name", k.pod)
	a.str("k8s.pod.uid", k.uid)
	if k.wkind != "" && k.wkind != "Pod" {
		a.str("k8s."+strings.ToLower(k.wkind)+".name", k.wname)
	}
	a.str("egressd.client.service_account", k.sa)
}

// putRecord: the OpenTelemetry semantic conventions where one exists,
// egressd.* for the rest (docs/operations.md lists them).
func putRecord(a attrs, r *record.Record) {
	a.str("egressd.id", r.ID)
	a.str("egressd.kind", r.Kind)
	a.str("egressd.event", r.Event)
	a.str("egressd.verdict", r.Verdict)
	a.str("egressd.reason", r.Reason)
	a.str("egressd.outcome", r.Outcome)
	a.str("egressd.policy", r.Policy)
	if r.Rule != nil {
		a.int("egressd.rule", int64(*r.Rule))
	}
	a.str("client.address", r.Client.IP)
	if r.Kind == record.KindDNS {
		a.str("dns.question.name", r.Host)
	} else {
		a.str("server.address", r.Host)
		if r.Port != 0 {
			a.int("server.port", int64(r.Port))
		}
	}
	if r.Peer != "" {
		host, port, err := net.SplitHostPort(r.Peer)
		if err != nil {
			host = r.Peer
		}
		a.str("network.peer.address", host)
		if p, err := strconv.Atoi(port); err == nil {
			a.int("network.peer.port", int64(p))
		}
	}
	if h := r.HTTP; h != nil {
		a.str("http.request.method", h.Method)
		if h.Status != 0 {
			a.int("http.response.status_code", int64(h.Status))
		}
		a.str("url.path", h.Path)
	}
	if t := r.TLS; t != nil {
		// tls.protocol.version is "1.3", the name "tls" (semantic conventions).
		if v, ok := strings.CutPrefix(t.Version, "TLS"); ok {
			a.str("tls.protocol.name", "tls")
			a.str("tls.protocol.version", strings.TrimSpace(v))
		}
		a.str("tls.server_name", t.SNI)
		a.str("tls.cipher", t.Cipher)
	}
}
