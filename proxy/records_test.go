package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/record"
)

// TestIncompleteHeadIsRecorded: a head that never completes (a slowloris
// client) is answered 408 at the header timeout and recorded with what was
// parsed of it, on the proxy and the Host listener; a connection that sent
// nothing is closed without a record (no request was made).
func TestIncompleteHeadIsRecorded(t *testing.T) {
	e := newEnv(t, envOpt{headerTimeout: 200 * time.Millisecond})
	hostLn := listen(t, "127.0.0.1:0")
	go e.p.ServeTransparentHTTP(hostLn, e.httpPort)
	for _, tc := range []struct {
		name, addr, send string
		kind, method     string
		host             string
	}{
		{"proxy listener, absolute-form", e.addr, "GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-A: 1\r\n", record.KindHTTP, "GET", "models.test"},
		{"proxy listener, CONNECT", e.addr, "CONNECT models.test:443 HTTP/1.1\r\nHo", record.KindConnect, "CONNECT", "models.test"},
		{"proxy listener, request line only half", e.addr, "GET http://user:PW@models.te", record.KindHTTP, "GET", "models.te"},
		{"Host listener", hostLn.Addr().String(), "GET /x HTTP/1.1\r\nHost: models.test\r\nX-A: 1", record.KindHTTP, "GET", "models.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, podIP, tc.addr)
			io.WriteString(c, tc.send)
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := e.sink.next(t)
			if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("X-Egressd-Reason") != "bad-request" {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			if r.Kind != tc.kind || r.Verdict != "deny" || r.Reason != "bad-request" || r.Outcome != record.OutcomeRefused ||
				r.Host != tc.host || r.HTTP == nil || r.HTTP.Method != tc.method || r.HTTP.Status != 408 ||
				r.Client.Pod != "llm-0" || !strings.Contains(r.Error, "header timeout") {
				t.Fatalf("record %+v http %+v", r, r.HTTP)
			}
			if bytes.Contains(e.sink.bytes(), []byte("PW")) {
				t.Fatal("userinfo in the record")
			}
		})
	}
	t.Run("nothing sent: closed, no record", func(t *testing.T) {
		c := dialFrom(t, podIP, e.addr)
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Fatalf("read %q, %v", b, err)
		}
		select {
		case l := <-e.sink.lines:
			t.Fatalf("record %s", l)
		default:
		}
	})
}

// TestRefusedHeadRecordsWhatWasParsed: a head the reader refuses gets a
// record that names the method and the host of the request line (or of
// Host), truncated, not an empty host.
func TestRefusedHeadRecordsWhatWasParsed(t *testing.T) {
	e := newEnv(t, envOpt{})
	long := strings.Repeat("a", 300) + ".test"
	for _, tc := range []struct {
		name, raw    string
		status       int
		method, host string
	}{
		{"space before the colon", "GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-A : 1\r\n\r\n", 400, "GET", "models.test"},
		{"obs-fold", "POST http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-A: 1\r\n  2\r\n\r\n", 400, "POST", "models.test"},
		{"bare LF", "GET http://models.test/ HTTP/1.1\nHost: models.test\n\n", 400, "GET", "models.test"},
		{"host from Host when the target has none", "GET /x HTTP/1.1\r\nHost: models.test:80\r\nBad\x01: 1\r\n\r\n", 400, "GET", "models.test"},
		{"long host truncated", "GET http://" + long + "/ HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n", 400, "GET", long[:admit.MaxHostLen]},
		{"unknown HTTP version", "GET http://models.test/ HTTP/2.0\r\nHost: models.test\r\n\r\n", 505, "GET", "models.test"},
		{"unsupported transfer coding", "POST http://models.test/ HTTP/1.1\r\nHost: models.test\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "POST", "models.test"},
		{"unsupported expectation", "POST http://models.test/ HTTP/1.1\r\nHost: models.test\r\nExpect: 200-ok\r\n\r\n", 417, "POST", "models.test"},
		// (The metadata address in that form: TestConnectAbsoluteURITarget.)
		{"CONNECT absolute URI with a bad Host: the URI's host", "CONNECT http://models.test:443/ HTTP/1.1\r\nHost: http://models.test:443/\r\n\r\n", 400, "CONNECT", "models.test"},
		{"head too large", "GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-Big: " + strings.Repeat("b", 40<<10) + "\r\n\r\n", 431, "GET", "models.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := rawRequest(t, e.addr, tc.raw)
			r := e.sink.next(t)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Egressd-Reason") != "bad-request" {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			if r.Reason != "bad-request" || r.Outcome != record.OutcomeRefused || r.Host != tc.host ||
				r.HTTP == nil || r.HTTP.Method != tc.method || r.HTTP.Status != tc.status || r.Client.Pod != "llm-0" {
				t.Fatalf("record %+v http %+v", r, r.HTTP)
			}
		})
	}
	if e.dials.Load() != 0 {
		t.Fatal("a refused head dialled")
	}
}

// TestConnectAbsoluteURITarget: CONNECT http://169.254.169.254:443/ is
// decided and recorded on the host the URI names (metadata), not on
// "http"; an allowed host in that form is still a bad request. Nothing is
// dialled.
func TestConnectAbsoluteURITarget(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, tc := range []struct {
		name, target string
		status       int
		reason, host string
	}{
		{"metadata address", "http://169.254.169.254:443/", 403, "metadata", "169.254.169.254"},
		{"metadata name", "http://metadata.google.internal:80/computeMetadata/v1/", 403, "metadata", "metadata.google.internal"},
		{"not allowlisted", fmt.Sprintf("https://evil.test:%d", e.tlsPort), 403, "not-allowlisted", "evil.test"},
		{"allowed host, malformed target", fmt.Sprintf("http://models.test:%d/", e.tlsPort), 400, "bad-request", "models.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, podIP, e.addr)
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", tc.target)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			r := e.sink.next(t)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Egressd-Reason") != tc.reason {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			if r.Kind != record.KindConnect || r.Reason != tc.reason || r.Host != tc.host || r.Verdict != "deny" {
				t.Fatalf("record %+v", r)
			}
		})
	}
	if e.dials.Load() != 0 {
		t.Fatal("dialled")
	}
}

// TestPathsNotRecordedByDefault: paths carry tokens (a bot token in the
// first segment, a query escaped into the path): by default no path is
// recorded, nor the path of a redirect (its host only); with
// AuditHTTPPath full the path is recorded, its query still removed.
func TestPathsNotRecordedByDefault(t *testing.T) {
	const token = "123456:AAHtokenSECRET"
	paths := []string{"/bot" + token + "/sendMessage", "/obj%3Ftoken=" + token + "/x"}
	for _, tc := range []struct {
		name     string
		httpPath HTTPPath
	}{{"default", ""}, {"none", HTTPPathNone}, {"full", HTTPPathFull}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{httpPath: tc.httpPath})
			for _, path := range paths {
				resp := rawRequest(t, e.addr, fmt.Sprintf("GET http://models.test:%d%s?q=QUERYSECRET HTTP/1.1\r\nHost: x\r\n\r\n", e.httpPort, path))
				r := e.sink.next(t)
				if resp.StatusCode != 404 || r.HTTP == nil || r.HTTP.Method != "GET" || r.HTTP.Status != 404 {
					t.Fatalf("status %d record http %+v", resp.StatusCode, r.HTTP)
				}
				want := ""
				if tc.httpPath == HTTPPathFull {
					want = path
				}
				if r.HTTP.Path != want {
					t.Fatalf("path %q, want %q", r.HTTP.Path, want)
				}
			}
			redirect := fmt.Sprintf("GET http://models.test:%d/redirect?to=http://cdn.blob.test/bot%s/file HTTP/1.1\r\nHost: x\r\n\r\n", e.httpPort, token)
			if resp := rawRequest(t, e.addr, redirect); resp.StatusCode != 302 {
				t.Fatal(resp.Status)
			}
			if r := e.sink.next(t); r.HTTP == nil || r.HTTP.RedirectHost != "cdn.blob.test" {
				t.Fatalf("http %+v", r.HTTP)
			}
			all := e.sink.bytes()
			if bytes.Contains(all, []byte("QUERYSECRET")) {
				t.Fatal("query string recorded")
			}
			if tc.httpPath != HTTPPathFull && bytes.Contains(all, []byte("SECRET")) {
				t.Fatalf("token recorded: %s", all)
			}
		})
	}
	t.Run("invalid value", func(t *testing.T) {
		if err := (Config{AuditHTTPPath: "some"}).Validate(); err == nil || !strings.Contains(err.Error(), "AuditHTTPPath") {
			t.Fatalf("Validate = %v", err)
		}
	})
}

// TestConfigValidateShared: the inputs the proxy shares with the admission
// pipeline are checked by admit.Config.Validate, once; the proxy's own
// beside them.
func TestConfigValidateShared(t *testing.T) {
	err := (Config{Inputs: admit.Inputs{Mode: "permissive"}}).Validate()
	if err == nil {
		t.Fatal("Validate of an empty Config = nil")
	}
	for _, w := range []string{"admit: config", "Policy is required", "Guard is required", `Mode "permissive"`, "Resolver is required", "Audit is required"} {
		if n := strings.Count(err.Error(), w); n != 1 {
			t.Fatalf("Validate = %q: %q %d times, want once", err, w, n)
		}
	}
}

// TestProbeMarker: Egressd-Probe names the probe in the record (bounded,
// sanitized), is never forwarded and changes no decision.
func TestProbeMarker(t *testing.T) {
	e := newEnv(t, envOpt{})
	t.Run("CONNECT", func(t *testing.T) {
		for _, tc := range []struct{ name, target, probe, want, reason string }{
			{"allowed", fmt.Sprintf("models.test:%d", e.tlsPort), "models-weights", "models-weights", "allowed"},
			{"denied", fmt.Sprintf("evil.test:%d", e.tlsPort), "neg/evil", "neg/evil", "not-allowlisted"},
			{"metadata", "169.254.169.254:80", "neg\"<metadata>", "neg__metadata_", "metadata"},
			{"long", fmt.Sprintf("evil.test:%d", e.tlsPort), strings.Repeat("p", 100), strings.Repeat("p", maxProbeLen), "not-allowlisted"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := dialFrom(t, podIP, e.addr)
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nEgressd-Probe: %s\r\n\r\n", tc.target, tc.target, tc.probe)
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				r := e.sink.next(t)
				if r.Probe != tc.want || r.Reason != tc.reason {
					t.Fatalf("status %d probe %q reason %q", resp.StatusCode, r.Probe, r.Reason)
				}
			})
		}
	})
	t.Run("plain HTTP: recorded, not forwarded", func(t *testing.T) {
		resp := rawRequest(t, e.addr, fmt.Sprintf("GET http://models.test:%d/echo HTTP/1.1\r\nHost: x\r\nEgressd-Probe: p1\r\n\r\n", e.httpPort))
		seen := <-e.seen
		r := e.sink.next(t)
		if resp.StatusCode != 200 || r.Probe != "p1" || r.Reason != "allowed" {
			t.Fatalf("status %d record %+v", resp.StatusCode, r)
		}
		if v := seen.Get(probeHeader); v != "" {
			t.Fatalf("origin saw %s: %q", probeHeader, v)
		}
	})
}

// TestAuditUnavailableRefuses: while records cannot be written, new
// requests are refused with 503 audit-unavailable (and recorded: the
// logger keeps what it can); nothing is dialled.
func TestAuditUnavailableRefuses(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	e := newEnv(t, envOpt{auditAvailable: func() bool { return !down.Load() }})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	c, resp := e.connect(podIP, target)
	c.Close()
	r := e.sink.next(t)
	if resp.StatusCode != 503 || resp.Header.Get("X-Egressd-Reason") != "audit-unavailable" ||
		r.Verdict != "deny" || r.Reason != "audit-unavailable" || r.Outcome != record.OutcomeRefused || r.Client.Pod != "llm-0" {
		t.Fatalf("status %d record %+v", resp.StatusCode, r)
	}
	resp = rawRequest(t, e.addr, fmt.Sprintf("GET http://models.test:%d/small HTTP/1.1\r\nHost: x\r\n\r\n", e.httpPort))
	if r := e.sink.next(t); resp.StatusCode != 503 || r.Reason != "audit-unavailable" {
		t.Fatalf("status %d record %+v", resp.StatusCode, r)
	}
	if e.dials.Load() != 0 {
		t.Fatal("dialled while the audit log was unavailable")
	}
	down.Store(false)
	c, resp = e.connect(podIP, target)
	c.Close()
	if r := e.sink.next(t); resp.StatusCode != 200 || r.Reason != "allowed" {
		t.Fatalf("status %d record %+v after recovery", resp.StatusCode, r)
	}
}

// fakeInterim stands for the audit logger's interim records.
type fakeInterim struct {
	mu     sync.Mutex
	opened chan func() record.Record
	ids    []string
	starts []time.Time
	done   atomic.Int32
}

func (f *fakeInterim) Open(id string, start time.Time, snap func() record.Record) func() {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.starts = append(f.starts, start)
	f.mu.Unlock()
	f.opened <- snap
	var once sync.Once
	return func() { once.Do(func() { f.done.Add(1) }) }
}

// TestInterimOpenForPlainHTTP: a forwarded request is registered for
// interim records under its id and start; its snapshot shows it as it
// stands; it is closed before its end record is written.
func TestInterimOpenForPlainHTTP(t *testing.T) {
	release := make(chan struct{})
	origin := listen(t, "127.0.0.1:0")
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("part one;"))
		http.NewResponseController(w).Flush()
		<-release
		w.Write([]byte("part two"))
	})}
	go srv.Serve(origin)
	t.Cleanup(func() { srv.Close() })
	port := origin.Addr().(*net.TCPAddr).Port
	fi := &fakeInterim{opened: make(chan func() record.Record, 1)}
	e := newEnv(t, envOpt{extra: rule(port), interim: fi})
	c := dialFrom(t, podIP, e.addr)
	fmt.Fprintf(c, "GET http://models.test:%d/ HTTP/1.1\r\nHost: x\r\nEgressd-Probe: p\r\n\r\n", port)
	snap := <-fi.opened
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	part := make([]byte, len("part one;"))
	if _, err := io.ReadFull(resp.Body, part); err != nil {
		t.Fatal(err)
	}
	s := snap()
	if s.Host != "models.test" || s.Verdict != "allow" || s.HTTP == nil || s.HTTP.Status != 200 || s.BytesReceived != int64(len(part)) || s.Probe != "p" {
		t.Fatalf("snapshot %+v http %+v", s, s.HTTP)
	}
	if fi.done.Load() != 0 {
		t.Fatal("closed while the request runs")
	}
	close(release)
	io.Copy(io.Discard, resp.Body)
	r := e.sink.next(t)
	if fi.done.Load() != 1 {
		t.Fatal("end record written before the interim registration was closed")
	}
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if len(fi.ids) != 1 || r.ID != fi.ids[0] || !r.Start.Equal(fi.starts[0]) || s.ID != r.ID {
		t.Fatalf("end record id %q start %v; opened %v %v", r.ID, r.Start, fi.ids, fi.starts)
	}
}
