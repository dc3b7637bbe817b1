package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

// resetOrigin reads the first bytes of every connection (a ClientHello)
// and then closes it, with a reset when rst: an upstream that fails the
// handshake before any server hello.
func resetOrigin(t *testing.T, rst bool) int {
	t.Helper()
	ln := listen(t, "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.Read(make([]byte, 4096))
				if rst {
					c.(*net.TCPConn).SetLinger(0)
				}
				c.Close()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestTunnelOutcome: the record of a tunnel says how it ended.
func TestTunnelOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		run     func(t *testing.T, e *env)
		outcome string
		verdict string
		reason  string
	}{
		{"ended by the client", 0, func(t *testing.T, e *env) {
			c := e.openTLS(t, podIP, fmt.Sprintf("models.test:%d", e.tlsPort), "models.test")
			if err := get(c, "models.test"); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}, record.OutcomeOK, "allow", "allowed"},
		{"server alert: the upstream answered", 0, func(t *testing.T, e *env) {
			c, _ := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
			tc := tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool(), NextProtos: []string{"spdy/1"}})
			if tc.Handshake() == nil {
				t.Fatal("handshake succeeded")
			}
			c.Close()
		}, record.OutcomeOK, "allow", "allowed"},
		{"idle", 200 * time.Millisecond, func(t *testing.T, e *env) {
			c, _ := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
			io.Copy(io.Discard, c)
		}, record.OutcomeIdleTimeout, "allow", "allowed"},
		{"cut at the drain deadline", 0, func(t *testing.T, e *env) {
			e.openTLS(t, podIP, fmt.Sprintf("models.test:%d", e.tlsPort), "models.test")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			e.p.Shutdown(ctx)
		}, record.OutcomeDrained, "allow", "allowed"},
		{"upstream reset during the handshake", 0, func(t *testing.T, e *env) {
			port := resetOrigin(t, true)
			e.setPolicy(t, fmt.Sprintf("  - hosts: [\"evil.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", port))
			c, _ := e.connect(podIP, fmt.Sprintf("evil.test:%d", port))
			if tls.Client(c, &tls.Config{ServerName: "evil.test"}).Handshake() == nil {
				t.Fatal("handshake succeeded")
			}
			c.Close()
		}, record.OutcomeUpstreamError, "allow", "allowed"},
		{"upstream closed during the handshake", 0, func(t *testing.T, e *env) {
			port := resetOrigin(t, false)
			e.setPolicy(t, fmt.Sprintf("  - hosts: [\"evil.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", port))
			c, _ := e.connect(podIP, fmt.Sprintf("evil.test:%d", port))
			if tls.Client(c, &tls.Config{ServerName: "evil.test"}).Handshake() == nil {
				t.Fatal("handshake succeeded")
			}
			c.Close()
		}, record.OutcomeUpstreamError, "allow", "allowed"},
		{"refused after the 200", 0, func(t *testing.T, e *env) {
			c, _ := e.connect(podIP, fmt.Sprintf("models.test:%d", e.tlsPort))
			if tls.Client(c, &tls.Config{ServerName: "cdn.blob.test"}).Handshake() == nil {
				t.Fatal("handshake succeeded")
			}
			c.Close()
		}, record.OutcomeRefused, "deny", "sni-mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{idle: tc.idle})
			before := time.Now()
			tc.run(t, e)
			r := e.sink.next(t)
			if r.Outcome != tc.outcome || r.Verdict != tc.verdict || r.Reason != tc.reason {
				t.Fatalf("record outcome %q verdict %q reason %q error %q", r.Outcome, r.Verdict, r.Reason, r.Error)
			}
			if r.ID == "" || r.Start.Before(before) || r.Time.Before(r.Start) || r.Event != record.EventEnd {
				t.Fatalf("record id %q start %v time %v event %q", r.ID, r.Start, r.Time, r.Event)
			}
		})
	}
}

// interimRecorder is a Config.Interim that keeps what it is given.
type interimRecorder struct {
	mu    sync.Mutex
	id    string
	start time.Time
	snap  func() record.Record
	done  bool
	open  chan struct{}
}

func (r *interimRecorder) Open(id string, start time.Time, snap func() record.Record) func() {
	r.mu.Lock()
	r.id, r.start, r.snap = id, start, snap
	r.mu.Unlock()
	close(r.open)
	return func() {
		r.mu.Lock()
		r.done = true
		r.mu.Unlock()
	}
}

// TestTunnelInterim: an open tunnel registers for interim records at
// admission; its snapshot has the end record's id and start, the decision
// and the bytes so far, and it unregisters before its end record.
func TestTunnelInterim(t *testing.T) {
	rec := &interimRecorder{open: make(chan struct{})}
	e := newEnv(t, envOpt{interim: rec})
	c := e.openTLS(t, podIP, fmt.Sprintf("models.test:%d", e.tlsPort), "models.test")
	if err := get(c, "models.test"); err != nil {
		t.Fatal(err)
	}
	<-rec.open
	rec.mu.Lock()
	snap, id, start := rec.snap, rec.id, rec.start
	rec.mu.Unlock()
	s := snap()
	if s.ID != id || !s.Start.Equal(start) || s.Verdict != "allow" || s.Host != "models.test" || s.BytesReceived == 0 || s.BytesSent == 0 {
		t.Fatalf("snapshot id %q start %v verdict %q host %q bytes %d/%d", s.ID, s.Start, s.Verdict, s.Host, s.BytesSent, s.BytesReceived)
	}
	if s.TLS == nil || s.TLS.SNI != "models.test" || s.TLS.Result != "established" {
		t.Fatalf("snapshot tls %+v", s.TLS)
	}
	c.Close()
	r := e.sink.next(t)
	rec.mu.Lock()
	done := rec.done
	rec.mu.Unlock()
	if !done || r.ID != id || !r.Start.Equal(start) || r.BytesReceived < s.BytesReceived {
		t.Fatalf("done %v, end record id %q start %v bytes %d", done, r.ID, r.Start, r.BytesReceived)
	}
}
