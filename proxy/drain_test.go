package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
)

// TestShutdownWaitsForStreamingHTTP: a plain HTTP response whose origin
// never ends its body is cut at the drain deadline, and its record is
// written before Shutdown returns: the CLI closes the audit log right after,
// so a record written later is lost. Shutdown's Close does not wait for
// handlers; the proxy must.
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

// hookConn calls onAbort when net/http aborts its background read with a
// deadline in the past: in a CONNECT handler, that is inside Hijack, after
// the tunnel was tracked and before its client is set.
type hookConn struct {
	net.Conn
	once    sync.Once
	onAbort func()
}

func (c *hookConn) SetReadDeadline(d time.Time) error {
	err := c.Conn.SetReadDeadline(d)
	if !d.IsZero() && d.Before(time.Unix(1000, 0)) {
		c.once.Do(c.onAbort)
	}
	return err
}

type hookListener struct {
	net.Listener
	onAbort func()
}

func (l hookListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: c, onAbort: l.onAbort}, nil
}

// TestConnectCutBeforeClientSet: a tunnel cut at the drain deadline
// between being tracked and getting its client connection must not answer
// 200 nor start: the cut closed nothing of the client then, and Shutdown
// would wait for the tunnel until its idle timeout.
func TestConnectCutBeforeClientSet(t *testing.T) {
	e := newEnv(t, envOpt{})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeProxy(hookListener{Listener: ln, onAbort: func() {
		// What Shutdown does at the drain deadline, at this exact point.
		e.p.mu.Lock()
		for tn := range e.p.tunnels {
			tn.cut()
		}
		e.p.mu.Unlock()
	}})
	c := dialFrom(t, podIP, ln.Addr().String())
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	b, err := io.ReadAll(c)
	if err != nil || len(b) != 0 {
		t.Fatalf("client read %q, %v; want EOF and no answer", b, err)
	}
	r := e.sink.next(t)
	if r.Kind != audit.KindConnect || !strings.Contains(r.Error, "cut at drain deadline") {
		t.Fatalf("record %+v", r)
	}
}
