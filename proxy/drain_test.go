package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

// TestShutdownWaitsForStreamingHTTP: a plain HTTP response whose origin
// never ends its body is cut at the drain deadline, and its record is
// written before Shutdown returns: the CLI closes the audit log right after,
// so a record written later is lost.
func TestShutdownWaitsForStreamingHTTP(t *testing.T) {
	origin := listen(t, "127.0.0.1:0")
	port := origin.Addr().(*net.TCPAddr).Port
	release := make(chan struct{})
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first chunk\n"))
		_ = http.NewResponseController(w).Flush()
		select { // the body never ends on its own
		case <-r.Context().Done():
		case <-release:
		}
	})}
	go srv.Serve(origin)
	t.Cleanup(func() { close(release); srv.Close() })
	e := newEnv(t, envOpt{extra: fmt.Sprintf("  - hosts: [\"models.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", port)})

	c := dialFrom(t, podIP, e.addr)
	fmt.Fprintf(c, "GET http://models.test:%d/ HTTP/1.1\r\nHost: models.test:%d\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first chunk\n" {
		t.Fatalf("first chunk %q %v", line, err)
	}
	// The handler is now copying the body: the drain deadline has passed.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	select {
	case l := <-e.sink.lines:
		if !strings.Contains(string(l), `"models.test"`) || !strings.Contains(string(l), "cut at drain deadline") {
			t.Fatalf("record %s", l)
		}
	default:
		t.Fatal("Shutdown returned before the streaming request's record was written")
	}
}

// TestConnectCutWhileDialling: a CONNECT still dialling at the drain
// deadline is not answered 200 nor relayed, and its record (outcome
// drained, the decision unchanged) is written before Shutdown returns.
func TestConnectCutWhileDialling(t *testing.T) {
	e := newEnv(t, envOpt{})
	entered := make(chan struct{})
	e.p.dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		close(entered)
		<-ctx.Done() // the drain deadline cancels the dial
		return nil, ctx.Err()
	}
	c := dialFrom(t, podIP, e.addr)
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	select {
	case l := <-e.sink.lines:
		var r record.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != record.KindConnect || r.Outcome != record.OutcomeDrained || r.Verdict != "allow" || r.Reason != "allowed" {
			t.Fatalf("record %s", l)
		}
	default:
		t.Fatal("Shutdown returned before the CONNECT's record was written")
	}
	b, _ := io.ReadAll(c)
	if strings.Contains(string(b), " 200 ") {
		t.Fatalf("client got %q", b)
	}
}

// TestSNICutWhileDialling: an SNI connection still dialling at the drain
// deadline (a blackholed origin: the connect never completes) ends with
// Shutdown's deadline, as a CONNECT does, not after its own dial timeout;
// its record (outcome drained, the decision unchanged) is written before
// Shutdown returns.
func TestSNICutWhileDialling(t *testing.T) {
	e := newEnv(t, envOpt{})
	entered := make(chan struct{})
	e.p.dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		close(entered)
		<-ctx.Done() // a blackholed origin: only the context ends the dial
		return nil, ctx.Err()
	}
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeSNI(ln, e.tlsPort)
	c := dialFrom(t, podIP, ln.Addr().String())
	go func() {
		// The handshake stops at the ClientHello: nothing answers it.
		_ = tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool()}).Handshake()
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- e.p.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second): // the dial's own bound is 4×DialTimeout, 40s
		t.Fatal("Shutdown waits for an SNI dial that the drain deadline does not reach")
	}
	select {
	case l := <-e.sink.lines:
		var r record.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != record.KindSNI || r.Outcome != record.OutcomeDrained || r.Verdict != "allow" || r.Reason != "allowed" {
			t.Fatalf("record %s", l)
		}
	default:
		t.Fatal("Shutdown returned before the SNI connection's record was written")
	}
}
