package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

func curl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-sS", "--max-time", "20", "--noproxy", ""}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestConnectCurlAllowedWithRecord(t *testing.T) {
	e := newEnv(t, envOpt{})
	url := fmt.Sprintf("https://models.test:%d/w.bin", e.tlsPort)
	out, stderr, err := curl(t, "-f", "--proxy", "http://"+e.addr, "--interface", podIP, "--cacert", e.caFile, url)
	if err != nil {
		t.Fatalf("curl: %v: %s", err, stderr)
	}
	if out != string(weights) {
		t.Fatalf("body: got %d bytes, want %d", len(out), len(weights))
	}
	r := e.sink.next(t)
	checks := []struct {
		name string
		ok   bool
	}{
		{"kind", r.Kind == record.KindConnect},
		{"client", r.Client.IP == podIP && r.Client.Namespace == "llm-prod" && r.Client.Pod == "llm-0" && r.Client.ServiceAccount == "llm-server"},
		{"workload", r.Client.Workload != nil && *r.Client.Workload == record.Workload{Kind: "Pod", Name: "llm-0"}},
		{"host", r.Host == "models.test" && r.Port == e.tlsPort},
		{"verdict", r.Verdict == "allow" && !r.WouldDeny && r.Reason == "allowed"},
		{"policy", r.Policy == "llm-prod/llm-bootstrap" && r.Rule != nil && *r.Rule == 0},
		{"purpose", r.Purpose == "model weights" && r.Owner == "ml-platform"},
		{"dns", r.DNS != nil && len(r.DNS.Answers) == 1 && r.DNS.Answers[0] == "127.0.0.1" && r.DNS.TTL == 30 && r.DNS.Rcode == "NOERROR"},
		{"peer", r.Peer == "127.0.0.1:"+strconv.Itoa(e.tlsPort)},
		{"tls", r.TLS != nil && r.TLS.SNI == "models.test" && r.TLS.Version == "TLS1.3" && r.TLS.Cipher != "" && r.TLS.Result == "established"},
		{"client alpn", r.TLS != nil && len(r.TLS.ClientALPN) > 0},
		{"bytes", r.BytesReceived > int64(len(weights)) && r.BytesSent > 0},
		{"duration", r.DurationMS > 0},
		// curl may close with the server's session tickets unread: the
		// kernel then resets, an honest end of the client's side.
		{"no error", r.Error == "" || strings.Contains(r.Error, "reset")},
		{"mode", r.Mode == "enforce"},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Errorf("record: %+v", r)
			}
		})
	}
}

func TestConnectRedirects(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, tc := range []struct {
		name       string
		to         string
		wantOK     bool
		wantReason string
	}{
		{"allowed blob host", fmt.Sprintf("https://cdn.blob.test:%d/w.bin?sig=SECRETSIG", e.tlsPort), true, "allowed"},
		{"not allowlisted host", fmt.Sprintf("https://evil.test:%d/w.bin?sig=SECRETSIG", e.tlsPort), false, "not-allowlisted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fmt.Sprintf("https://models.test:%d/redirect?to=%s", e.tlsPort, tc.to)
			out, stderr, err := curl(t, "-fL", "--proxy", "http://"+e.addr, "--interface", podIP, "--cacert", e.caFile, url)
			if tc.wantOK != (err == nil) {
				t.Fatalf("curl err = %v (%s), want success %v", err, stderr, tc.wantOK)
			}
			if tc.wantOK && out != string(weights) {
				t.Fatalf("body %d bytes", len(out))
			}
			if !tc.wantOK && !strings.Contains(stderr, "403") {
				t.Fatalf("curl stderr %q: want the 403", stderr)
			}
			first, second := e.sink.next(t), e.sink.next(t)
			if second.Host == "models.test" {
				first, second = second, first // the order of the two ends is not fixed
			}
			if first.Host != "models.test" || first.Verdict != "allow" {
				t.Fatalf("first record %+v", first)
			}
			if second.Reason != tc.wantReason {
				t.Fatalf("second record reason %q, want %q: %+v", second.Reason, tc.wantReason, second)
			}
			if bytes.Contains(e.sink.bytes(), []byte("SECRETSIG")) {
				t.Fatal("query string in the audit log")
			}
		})
	}
}

func TestConnectRefusals(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, tc := range []struct {
		name, src, target string
		status            int
		reason            string
	}{
		{"unknown client", nobody, fmt.Sprintf("models.test:%d", e.tlsPort), 403, "unknown-client"},
		{"pod selected by no policy", otherIP, fmt.Sprintf("models.test:%d", e.tlsPort), 403, "not-allowlisted"},
		{"port not allowed", podIP, "models.test:8443", 403, "port-not-allowed"},
		{"not allowlisted", podIP, fmt.Sprintf("evil.test:%d", e.tlsPort), 403, "not-allowlisted"},
		{"metadata address never dialled", podIP, fmt.Sprintf("meta.test:%d", e.tlsPort), 403, "metadata"},
		{"metadata name", podIP, "metadata.google.internal:80", 403, "metadata"},
		{"private address without cidrs", podIP, fmt.Sprintf("norule.test:%d", e.tlsPort), 403, "private-address"},
		{"invalid host", podIP, "bad_host!.test:443", 400, "invalid-host"},
		{"missing port", podIP, "models.test", 400, "bad-request"},
		{"resolve failed", podIP, fmt.Sprintf("models.test:%d", e.httpPort), 0, ""},
	} {
		if tc.status == 0 {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			c, resp := e.connect(tc.src, tc.target)
			c.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("X-Egressd-Reason"); got != tc.reason {
				t.Fatalf("X-Egressd-Reason %q, want %q", got, tc.reason)
			}
			if e.dials.Load() != before {
				t.Fatal("a refused request dialled")
			}
			r := e.sink.next(t)
			if r.Verdict != "deny" || r.Reason != tc.reason || r.Kind != record.KindConnect {
				t.Fatalf("record %+v", r)
			}
		})
	}
	if _, ok := e.dialAddrs.Load("169.254.169.254:" + strconv.Itoa(e.tlsPort)); ok {
		t.Fatal("metadata address dialled")
	}
}

func TestConnectBodyNamesHostPodReason(t *testing.T) {
	e := newEnv(t, envOpt{})
	c, resp := e.connect(podIP, fmt.Sprintf("evil.test:%d", e.tlsPort))
	defer c.Close()
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	line := string(b[:n])
	for _, want := range []string{"evil.test", "llm-prod/llm-0", "not-allowlisted"} {
		if !strings.Contains(line, want) {
			t.Errorf("body %q lacks %q", line, want)
		}
	}
	e.sink.next(t)
}

func TestConnectFallsThroughAndSkipsNever(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, tc := range []struct{ name, host string }{
		{"second address after refused dial", "fallback.test"},
		{"never-class address skipped", "multi.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp := e.connect(podIP, fmt.Sprintf("%s:%d", tc.host, e.tlsPort))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, err := e.tlsGet(c, tc.host, "/w.bin"); err != nil && !strings.Contains(err.Error(), "certificate") {
				t.Fatal(err)
			}
			c.Close()
			r := e.sink.next(t)
			if r.Peer != "127.0.0.1:"+strconv.Itoa(e.tlsPort) || r.Verdict != "allow" {
				t.Fatalf("record %+v", r)
			}
		})
	}
	if _, ok := e.dialAddrs.Load("169.254.169.254:" + strconv.Itoa(e.tlsPort)); ok {
		t.Fatal("metadata address dialled")
	}
}

func TestConnectSNIMismatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      policy.Mode
		wantAllow bool
	}{
		{"enforce refuses", policy.ModeEnforce, false},
		{"audit allows and marks", policy.ModeAudit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{mode: tc.mode})
			c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			_, err := e.tlsGet(c, "cdn.blob.test", "/w.bin")
			if (err == nil) != tc.wantAllow {
				t.Fatalf("err = %v, want allowed %v", err, tc.wantAllow)
			}
			c.Close()
			r := e.sink.next(t)
			if r.Reason != "sni-mismatch" || r.TLS == nil || r.TLS.SNI != "cdn.blob.test" {
				t.Fatalf("record %+v", r)
			}
			if tc.wantAllow != (r.Verdict == "allow" && r.WouldDeny) {
				t.Fatalf("verdict %q would_deny %v", r.Verdict, r.WouldDeny)
			}
		})
	}
}

func TestAuditModeWouldDenyButNeverStays(t *testing.T) {
	e := newEnv(t, envOpt{mode: policy.ModeAudit})
	for _, tc := range []struct {
		name, src, host string
		wantStatus      int
		reason          string
		wouldDeny       bool
	}{
		{"not allowlisted passes", podIP, "evil.test", 200, "not-allowlisted", true},
		{"metadata still denied", podIP, "meta.test", 403, "metadata", false},
		{"unknown client still denied", nobody, "models.test", 403, "unknown-client", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp := e.connect(tc.src, fmt.Sprintf("%s:%d", tc.host, e.tlsPort))
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantStatus == 200 {
				if _, err := e.tlsGet(c, tc.host, "/w.bin"); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			r := e.sink.next(t)
			if r.Reason != tc.reason || r.WouldDeny != tc.wouldDeny || r.Mode != "audit" {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

func TestConnectNotTLSAndServerAlert(t *testing.T) {
	e := newEnv(t, envOpt{})
	t.Run("plain HTTP through CONNECT is not-tls", func(t *testing.T) {
		c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.httpPort))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		fmt.Fprintf(c, "GET /echo HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n")
		b := make([]byte, 4096)
		n, _ := c.Read(b)
		if !strings.Contains(string(b[:n]), "200 OK") {
			t.Fatalf("response %q", b[:n])
		}
		<-e.seen
		c.Close()
		r := e.sink.next(t)
		if r.TLS == nil || r.TLS.Result != "not-tls" {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("server alert is recorded", func(t *testing.T) {
		c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// Offer only a protocol the server does not speak: it answers with
		// a no_application_protocol alert (RFC 7301 §3.2).
		tc := tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool(), NextProtos: []string{"spdy/1"}})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake succeeded")
		}
		c.Close()
		r := e.sink.next(t)
		if r.TLS == nil || r.TLS.Result != "alert:no_application_protocol" {
			t.Fatalf("record tls %+v", r.TLS)
		}
	})
}

func TestShutdownDrainsThenCuts(t *testing.T) {
	e := newEnv(t, envOpt{})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	a, resp := e.connect(podIP, target)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	b, resp := e.connect(podIP, target)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// Both tunnels are established and idle (no hello sent yet).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.p.Shutdown(ctx) }()

	a.Close() // the first tunnel ends on its own while draining
	ra := e.sink.next(t)
	if ra.Error != "" || ra.Verdict != "allow" {
		t.Fatalf("drained record %+v", ra)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a tunnel open", err)
	default:
	}
	cancel() // the drain deadline
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	rb := e.sink.next(t)
	if !strings.Contains(rb.Error, "cut at drain deadline") {
		t.Fatalf("cut record %+v", rb)
	}
	if !e.p.Draining() {
		t.Fatal("not draining")
	}
	b.Close()
	if _, err := http.Get("http://" + e.addr); err == nil {
		t.Fatal("listener still accepting")
	}
}

// TestConnectLogsNothing: a tunnel that goes well leaves no line in the
// proxy's log. After the hijack net/http's response writer is gone; a flush
// of it used to panic (recovered and logged by net/http with a stack trace)
// on every CONNECT.
func TestConnectLogsNothing(t *testing.T) {
	var log testutil.SyncBuffer
	e := newEnv(t, envOpt{log: &log})
	for i := range 3 {
		c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT %d: %s", i, resp.Status)
		}
		if _, err := e.tlsGet(c, "models.test", "/small"); err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		c.Close()
		// The client closes with the server's session tickets unread, so
		// the kernel may answer with a reset: an honest error in the
		// record, not a log line.
		if r := e.sink.next(t); r.Kind != record.KindConnect || r.Verdict != "allow" ||
			(r.Error != "" && !strings.Contains(r.Error, "reset")) {
			t.Fatalf("record %d: kind %q verdict %q error %q", i, r.Kind, r.Verdict, r.Error)
		}
	}
	if s := log.String(); s != "" {
		t.Fatalf("proxy log:\n%s", s)
	}
}
