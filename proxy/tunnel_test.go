package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestTunnelIdleTimeoutRecorded(t *testing.T) {
	e := newEnv(t, envOpt{idle: 200 * time.Millisecond})
	c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.httpPort))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// Nothing is sent: the proxy closes the tunnel and says why.
	if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	r := e.sink.next(t)
	if !strings.Contains(r.Error, "idle timeout") || r.Verdict != "allow" {
		t.Fatalf("record %+v", r)
	}
}

// A client may send its ClientHello right behind the CONNECT without
// waiting for the 200; those bytes sit in net/http's reader and must reach
// the origin first.
func TestConnectPipelinedClientHello(t *testing.T) {
	e := newEnv(t, envOpt{})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	c := dialFrom(t, podIP, e.addr)
	hello := captureClientHello(t, "models.test", []string{"http/1.1"})
	// Send CONNECT and a hello together; the handshake itself is done by a
	// real client afterwards, so here only the check of the pipelined bytes
	// matters: a mismatching SNI in them must still be refused.
	_ = hello
	bad := captureClientHello(t, "cdn.blob.test", nil)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n%s", target, target, bad)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp %v err %v", resp, err)
	}
	io.Copy(io.Discard, br)
	r := e.sink.next(t)
	if r.Reason != "sni-mismatch" || r.Verdict != "deny" {
		t.Fatalf("record %+v", r)
	}
}

func TestMetricsMove(t *testing.T) {
	e := newEnv(t, envOpt{})
	c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool()})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if got := value(e.m.ActiveTunnels.WithLabelValues("connect")); got != 1 {
		t.Fatalf("active tunnels %v while open", got)
	}
	tc.Close()
	e.sink.next(t)
	c2, _ := e.connect(podIP, fmt.Sprintf("evil.test:%d", e.tlsPort))
	c2.Close()
	e.sink.next(t)
	// The logger counts a record once every sink has taken it: the test's
	// sink may see it a moment before the counter moves.
	for deadline := time.Now().Add(5 * time.Second); value(e.m.AuditWritten) < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"allowed", value(e.m.Requests.WithLabelValues("connect", "allow", "allowed", "false")), 1},
		{"denied", value(e.m.Requests.WithLabelValues("connect", "deny", "not-allowlisted", "false")), 1},
		{"active back to zero", value(e.m.ActiveTunnels.WithLabelValues("connect")), 0},
		{"bytes received", min(value(e.m.BytesRelayed.WithLabelValues("received")), 1), 1},
		{"audit records", value(e.m.AuditWritten), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// value reads one counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}
