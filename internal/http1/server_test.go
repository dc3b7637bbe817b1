package http1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// funcHandler is a Handler made of functions; nil ones do the least.
type funcHandler struct {
	released atomic.Int64
	head     func(c *Conn, h *Head)
}

func (f *funcHandler) Open(net.Conn) (func(), bool) {
	return func() { f.released.Add(1) }, true
}

func (f *funcHandler) Head(c *Conn, h *Head) { f.head(c, h) }

func (f *funcHandler) Refused(*Conn, *HeadError) {}

func startServer(t *testing.T, h Handler) (*Server, string) {
	t.Helper()
	s, err := New(listenLoopback(t), Config{Handler: h, HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, s.ln.Addr().String()
}

// TestHijack: a handler that takes a CONNECT's connection over gets the
// bytes the client sent past the head and the connection's release
// function; the server forgets the connection (Shutdown does not wait
// for it) and neither closes it nor calls release.
func TestHijack(t *testing.T) {
	type got struct {
		nc      net.Conn
		release func()
		pre     []byte
	}
	hijacked := make(chan got, 1)
	fh := &funcHandler{}
	fh.head = func(c *Conn, h *Head) {
		nc, release, pre := c.Hijack()
		hijacked <- got{nc, release, pre}
	}
	s, addr := startServer(t, fh)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n\x16\x03\x01hello")
	g := <-hijacked
	defer g.nc.Close()
	if string(g.pre) != "\x16\x03\x01hello" {
		t.Fatalf("bytes past the head %q", g.pre)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown waited for a hijacked connection: %v", err)
	}
	if n := fh.released.Load(); n != 0 {
		t.Fatalf("release called %d times for a hijacked connection", n)
	}
	// The connection is the handler's and still open.
	io.WriteString(g.nc, "pong")
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "pong" {
		t.Fatalf("after the hijack: %q %v", b, err)
	}
	g.release()
}

// TestKeepAliveAndShutdown: pipelined requests are answered in order on
// one connection, chunked when no length is declared; Shutdown closes an
// idle connection at once and lets a request in progress finish with
// Connection: close, and the release function runs for each connection.
func TestKeepAliveAndShutdown(t *testing.T) {
	inFlight, proceed := make(chan struct{}), make(chan struct{})
	fh := &funcHandler{}
	fh.head = func(c *Conn, h *Head) {
		var req http.Request
		x := c.Begin(context.Background(), h, &url.URL{Path: h.Target}, &req)
		if req.URL.Path == "/slow" {
			inFlight <- struct{}{}
			<-proceed
		}
		io.WriteString(x.ResponseWriter(), "body of "+req.URL.Path)
		x.Finish(false)
	}
	s, addr := startServer(t, fh)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for _, p := range []string{"/a", "/b"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "body of "+p || len(resp.TransferEncoding) == 0 || resp.Close {
			t.Fatalf("%s: %q chunked %v close %v", p, b, resp.TransferEncoding, resp.Close)
		}
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inFlight
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// The idle connection is closed by Shutdown.
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("idle connection still open: %d %v", n, err)
	}
	close(proceed)
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "body of /slow" || !resp.Close {
		t.Fatalf("request in progress at Shutdown: %q close %v", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if n := fh.released.Load(); n != 2 {
		t.Fatalf("release called %d times for 2 connections", n)
	}
	if !strings.HasPrefix(string(AppendStatusLine(nil, 599)), "HTTP/1.1 599 status 599\r\n") {
		t.Fatalf("status line of an unknown code: %q", AppendStatusLine(nil, 599))
	}
}
