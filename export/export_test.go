package export_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/export"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/internal/vlogstest"
	"github.com/egressd/egressd/record"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func testRecord(i int) *record.Record {
	rule := 1
	r := &record.Record{
		Time: time.Date(2026, 7, 1, 10, 0, 0, i*1000, time.UTC), ID: fmt.Sprintf("%032x", i+1), Kind: record.KindConnect,
		Client: record.Client{IP: "10.244.1.17", Namespace: "llm-prod", Pod: "llm-server-abc", ServiceAccount: "llm-server",
			Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
		Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed", Policy: "llm-prod/bootstrap", Rule: &rule,
		Peer: "203.0.113.10:443", TLS: &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Result: "established"},
		Outcome: "ok",
	}
	return r
}

// newLogger is an audit Logger with stdout (a buffer) as an in-process
// writer and x as its file sink.
func newLogger(t *testing.T, x *export.Exporter, stdout *testutil.SyncBuffer, failure audit.Failure) (*audit.Logger, *metrics.Metrics) {
	m := metrics.New()
	l := audit.New(audit.Config{Writers: []io.Writer{stdout, x}, Metrics: m, Failure: failure, FlushInterval: 10 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond})
	return l, m
}

// TestExportToVictoriaLogs: records written through the audit Logger reach
// a real VictoriaLogs, each its exact line as the body, with the semantic
// convention attributes; stdout got the same bytes.
func TestExportToVictoriaLogs(t *testing.T) {
	e := vlogstest.Start(t)
	reg := prometheus.NewRegistry()
	rows := shipAndRead(t, e, export.Config{Endpoint: e.OTLP, SpoolDir: t.TempDir(), FlushInterval: 20 * time.Millisecond, Registerer: reg}, 300)
	for i, f := range rows {
		for k, v := range map[string]string{"client.address": "10.244.1.17", "server.address": "models.example.com", "server.port": "443",
			"network.peer.address": "203.0.113.10", "tls.protocol.version": "1.3", "k8s.namespace.name": "llm-prod",
			"k8s.pod.name": "llm-server-abc", "k8s.deployment.name": "llm-server", "egressd.verdict": "allow",
			"egressd.reason": "allowed", "egressd.outcome": "ok", "egressd.rule": "1", "egressd.id": fmt.Sprintf("%032x", i+1)} {
			if f[k] != v {
				t.Errorf("row %d: %s = %q, want %q", i, k, f[k], v)
			}
		}
	}
}

// TestExportOCSFToVictoriaLogs: with SchemaOCSF the engine indexes the
// OCSF event's leaves of each record, beside the pod's k8s.* resource,
// and the body is still the exact line.
func TestExportOCSFToVictoriaLogs(t *testing.T) {
	e := vlogstest.Start(t)
	rows := shipAndRead(t, e, export.Config{Endpoint: e.OTLP, Schema: export.SchemaOCSF, FlushInterval: 20 * time.Millisecond}, 20)
	for i, f := range rows {
		for k, v := range map[string]string{"class_uid": "4002", "activity_id": "1", "disposition": "Allowed", "src_endpoint.ip": "10.244.1.17",
			"dst_endpoint.hostname": "models.example.com", "unmapped.k8s.namespace.name": "llm-prod", "k8s.namespace.name": "llm-prod",
			"metadata.uid": fmt.Sprintf("%032x", i+1)} {
			if f[k] != v {
				t.Errorf("row %d: %s = %q, want %q", i, k, f[k], v)
			}
		}
		if f["egressd.verdict"] != "" {
			t.Errorf("row %d: OpenTelemetry names beside OCSF's: %v", i, f)
		}
	}
}

// shipAndRead writes n records through an exporter made of cfg (and to a
// stdout buffer), closes both, and returns the engine's rows in time
// order as their fields, after checking that there are n and that each
// body is stdout's line.
func shipAndRead(t *testing.T, e *vlogstest.Engine, cfg export.Config, n int) []map[string]string {
	t.Helper()
	x, err := export.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var stdout testutil.SyncBuffer
	l, _ := newLogger(t, x, &stdout, audit.FailClosed)
	for i := range n {
		l.Write(testRecord(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := x.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := e.Query(ctx, "* | sort by (_time)")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(rows) != n || len(want) != n {
		t.Fatalf("engine holds %d records, stdout %d, want %d", len(rows), len(want), n)
	}
	out := make([]map[string]string, n)
	for i, row := range rows {
		if err := json.Unmarshal([]byte(row), &out[i]); err != nil {
			t.Fatal(err)
		}
		if out[i]["_msg"] != want[i] {
			t.Fatalf("row %d body\n%s\nwant stdout's line\n%s", i, out[i]["_msg"], want[i])
		}
		if i == 0 {
			t.Logf("fields: %s", row)
		}
	}
	return out
}

// TestSpoolFull: with the engine down, a spool that fills is a failing
// sink: --audit-failure closed makes the logger unavailable (requests are
// refused with audit-unavailable), open keeps it available and drops what
// does not fit in --audit-buffer, counted; stdout gets every record
// either way.
func TestSpoolFull(t *testing.T) {
	for _, failure := range []audit.Failure{audit.FailClosed, audit.FailOpen} {
		t.Run(string(failure), func(t *testing.T) {
			endpoint := fmt.Sprintf("http://127.0.0.1:%d/v1/logs", testutil.ClosedPort(t))
			x, err := export.New(export.Config{Endpoint: endpoint, SpoolDir: t.TempDir(), SpoolMax: export.MinSpoolMax,
				FlushInterval: 10 * time.Millisecond, RetryBackoff: time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var stdout testutil.SyncBuffer
			m := metrics.New()
			l := audit.New(audit.Config{Writers: []io.Writer{&stdout, x}, Metrics: m, Failure: failure, BufferLimit: 1 << 20,
				FlushInterval: time.Millisecond, RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
			const n = 8000 // about 4 MiB: four times the spool and the buffer
			deadline := time.Now().Add(30 * time.Second)
			i := 0
			for ; i < n || (failure == audit.FailClosed && l.Available() && time.Now().Before(deadline)); i++ {
				l.Write(testRecord(i))
			}
			if failure == audit.FailClosed && l.Available() {
				t.Fatalf("closed: still available after %d records into a 1 MiB spool with the engine down", i)
			}
			if failure == audit.FailOpen && !l.Available() {
				t.Fatal("open: unavailable")
			}
			if got := strings.Count(stdout.String(), "\n"); got != i {
				t.Fatalf("stdout has %d records, want %d", got, i)
			}
			if failure == audit.FailOpen {
				_ = l.Close()
				if d := testCounter(m.AuditDropped); d == 0 {
					t.Fatalf("open: nothing counted dropped of %d records", i)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = x.Close(ctx)
		})
	}
}

func testCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
