package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/internal/vlogstest"
)

// spoolFlags are egressd's flags for a spool that fills fast: the
// smallest spool and audit buffer (1 MiB each), signed records.
func spoolFlags(dir, upstream, otlp, failure string) []string {
	return []string{"--upstream-dns", upstream, "--audit-otlp", otlp, "--audit-spool", filepath.Join(dir, "spool"),
		"--audit-spool-max", "1048576", "--audit-buffer", "1048576", "--audit-failure", failure,
		"--audit-signing-key", filepath.Join(dir, "export-test.key"), "--metrics-addr", "127.0.0.1:0"}
}

// metric reads one counter or gauge of egressd's metrics endpoint.
func metric(t *testing.T, in *instance, name string) float64 {
	t.Helper()
	v, ok := testutil.Metric(t, in.metrics, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return v
}

// loadUntil runs the mixed load until cond holds (checked every 100 ms)
// or 60 s pass.
func loadUntil(t *testing.T, in *instance, origin string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { load(ctx, t, in, origin); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held under load")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type gap struct {
	Kind, Sink, Cause string
	Records           int64
	FirstSeq          *int64 `json:"first_seq"`
	LastSeq           *int64 `json:"last_seq"`
}

// gaps returns the gap records of an audit file.
func gaps(t *testing.T, path string) []gap {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []gap
	for line := range bytes.Lines(b) {
		var g gap
		if json.Unmarshal(line, &g) == nil && g.Kind == "gap" {
			out = append(out, g)
		}
	}
	return out
}

// TestExportSpoolFullOpen: with the engine down and --audit-failure open,
// the 1 MiB spool fills and records the export cannot hold are dropped and
// counted (egressd_audit_dropped_total) while the proxy serves. Once the
// engine is back the export's sink writes a gap record (to the engine and
// the audit file alike) naming the count and the seq range, and verify
// --from the engine reports exactly that range missing, named by the gap;
// verify over the audit file finds nothing.
func TestExportSpoolFullOpen(t *testing.T) {
	eng := vlogstest.Start(t)
	dir, origin, upstream := world(t)
	eng.Kill()
	file := filepath.Join(dir, "audit.jsonl")
	in := start(t, dir, file, spoolFlags(dir, upstream, eng.OTLP, "open")...)
	loadUntil(t, in, origin, func() bool { return metric(t, in, "egressd_audit_dropped_total") > 0 })
	if err := eng.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(gaps(t, file)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no gap record once the engine came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	dropped := metric(t, in, "egressd_audit_dropped_total")
	in.stop(t, syscall.SIGTERM)

	var inGaps int64
	for _, g := range gaps(t, file) {
		if !strings.HasPrefix(g.Sink, "otlp http://127.0.0.1:") || !strings.Contains(g.Cause, "spool full") || g.FirstSeq == nil {
			t.Errorf("gap record %+v: want the export's sink, the spool full, a seq range", g)
		}
		inGaps += g.Records
	}
	if float64(inGaps) != dropped {
		t.Errorf("gap records count %d dropped records, egressd_audit_dropped_total %v", inGaps, dropped)
	}
	pub := filepath.Join(dir, "export-test.pub")
	if out, err := exec.Command(egressdBin, "verify", "--key", pub, file).CombinedOutput(); err != nil {
		t.Errorf("verify over the audit file: %v\n%s", err, out)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	if err := eng.ForceFlush(fctx); err != nil { // what it took, searchable
		t.Fatal(err)
	}
	out, err := exec.Command(egressdBin, "verify", "--key", pub, "--from", eng.URL).CombinedOutput()
	if err == nil {
		t.Fatalf("verify --from the engine found nothing missing:\n%s", out)
	}
	named := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		switch {
		case strings.HasPrefix(line, "FAILED:"):
		case strings.HasPrefix(line, "missing ") && strings.Contains(line, "(gap recorded: otlp http://127.0.0.1:") && strings.Contains(line, "spool full"):
			named++
		default:
			t.Errorf("verify --from: a finding no gap record names: %s", line)
		}
	}
	if named == 0 {
		t.Errorf("verify --from names no gap:\n%s", out)
	}
	t.Logf("dropped %v, gap records %+v; verify --from:\n%s", dropped, gaps(t, file), out)
}

// TestExportSpoolFullClosed: with the engine down and --audit-failure
// closed, once the spool is full new requests are refused with
// audit-unavailable (503) and the refusals are recorded; once the engine
// is back they are served again.
func TestExportSpoolFullClosed(t *testing.T) {
	eng := vlogstest.Start(t)
	dir, origin, upstream := world(t)
	eng.Kill()
	file := filepath.Join(dir, "audit.jsonl")
	in := start(t, dir, file, spoolFlags(dir, upstream, eng.OTLP, "closed")...)
	status := func() int {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
		proxyURL, _ := url.Parse("http://" + in.proxy)
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), DialContext: d.DialContext, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		_, port, _ := net.SplitHostPort(origin)
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://svc.export.test:" + port + "/")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	loadUntil(t, in, origin, func() bool { return status() == http.StatusServiceUnavailable })
	if v := metric(t, in, "egressd_audit_available"); v != 0 {
		t.Errorf("egressd_audit_available %v while refusing", v)
	}
	if err := eng.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for status() != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("still refusing a minute after the engine came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	in.stop(t, syscall.SIGTERM)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"reason":"audit-unavailable"`)) {
		t.Error("no refusal recorded with reason audit-unavailable")
	}
	// Closed mode loses no record of a request it served: a full buffer
	// drops only refusals (they may use half of it), each counted in a gap
	// record.
	qctx, qcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer qcancel()
	rows, err := eng.Query(qctx, `"scope.name":="github.com/egressd/egressd/audit" | fields _msg`)
	if err != nil {
		t.Fatal(err)
	}
	inEngine := map[string]bool{}
	for _, r := range rows {
		var f map[string]string
		if err := json.Unmarshal([]byte(r), &f); err != nil {
			t.Fatal(err)
		}
		var rec struct{ ID string }
		_ = json.Unmarshal([]byte(f["_msg"]), &rec)
		inEngine[rec.ID] = true
	}
	lost := int64(0)
	for line := range bytes.Lines(b) {
		var rec struct{ ID, Reason string }
		if json.Unmarshal(line, &rec) != nil || rec.ID == "" || inEngine[rec.ID] {
			continue
		}
		if rec.Reason != "audit-unavailable" {
			t.Errorf("a served request's record is not in the engine: %s", line)
		}
		lost++
	}
	var inGaps int64
	for _, g := range gaps(t, file) {
		inGaps += g.Records
	}
	if lost > inGaps { // a gap counts lines: a checkpoint record too
		t.Errorf("%d refusals missing from the engine, %d records in gap records", lost, inGaps)
	}
	t.Logf("%d records in the engine; %d refusals dropped, in gap records", len(rows), lost)
}
