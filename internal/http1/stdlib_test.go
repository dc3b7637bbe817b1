package http1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// badHeads is the adversarial head corpus of
// TestStdlibServerAnswersBadHeadsWithoutHandler: the shapes docs/design.md
// refuses, each with what net/http's server does with it (measured with
// this test: Go's net/http of the module's toolchain) and the status
// http1 refuses it with.
var badHeads = []struct {
	name string
	raw  string
	// slow: the client sends raw and then waits (a head that never
	// completes: the header timeout); else it half-closes after raw.
	slow bool
	// stdStatus is net/http's answer (0: it closes without one);
	// stdHandler says whether it calls the handler at all.
	stdStatus  int
	stdHandler bool
	// ownStatus is the status http1 hands Handler.Refused (0: the client
	// left, nothing to answer; the record is still written).
	ownStatus int
}{
	{name: "oversized head", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", 8<<10) + "\r\n\r\n", stdStatus: 431, ownStatus: 431},
	{name: "incomplete at the header timeout", raw: "GET / HTTP/1.1\r\nHost: a\r\n", slow: true, stdStatus: 0, ownStatus: 408},
	{name: "client half-closes inside the head", raw: "GET / HTTP/1.1\r\nHost: a\r\n", stdStatus: 400, ownStatus: 0},
	{name: "duplicate Host", raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", stdStatus: 400, ownStatus: 400},
	{name: "missing Host", raw: "GET / HTTP/1.1\r\n\r\n", stdStatus: 400, ownStatus: 400},
	{name: "Content-Length signed", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", stdStatus: 400, ownStatus: 400},
	{name: "Content-Length fields disagree", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", stdStatus: 400, ownStatus: 400},
	{name: "space before colon", raw: "GET / HTTP/1.1\r\nHost : b\r\nHost: a\r\n\r\n", stdStatus: 400, ownStatus: 400},
	{name: "NUL in a value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: \x00\r\n\r\n", stdStatus: 400, ownStatus: 400},
	{name: "Transfer-Encoding list", raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", stdStatus: 501, ownStatus: 501},
	{name: "Expect other than 100-continue", raw: "POST / HTTP/1.1\r\nHost: a\r\nExpect: x\r\nContent-Length: 1\r\n\r\na", stdStatus: 417, ownStatus: 417},
	// Smuggling shapes: net/http reads them, with a framing or a host
	// another parser on the path may read differently.
	{name: "CL and TE", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", stdStatus: 200, stdHandler: true, ownStatus: 400},
	{name: "TE on HTTP/1.0", raw: "POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", stdStatus: 200, stdHandler: true, ownStatus: 400},
	{name: "obs-fold", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", stdStatus: 200, stdHandler: true, ownStatus: 400},
	{name: "bare LF", raw: "GET / HTTP/1.1\nHost: a\n\n", stdStatus: 200, stdHandler: true, ownStatus: 400},
	{name: "HTTP/1.2", raw: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", stdStatus: 200, stdHandler: true, ownStatus: 505},
}

// exchangeRaw sends raw on a new connection to addr and returns the status
// of the first answer, 0 when the server closed without one.
func exchangeRaw(t *testing.T, addr, raw string, slow bool) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if !slow {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
			return 0
		}
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && strings.Contains(oe.Err.Error(), "reset")
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// headTimeout is both servers' header timeout: short, since one case
// waits for it.
const headTimeout = 300 * time.Millisecond

// TestStdlibServerAnswersBadHeadsWithoutHandler is the functional reason
// egressd serves HTTP/1 itself (docs/architecture.md, "Measured choices
// on the request path"; BenchmarkPlainHTTP is a tie): docs/design.md wants
// a 4xx and a record for every malformed request, and a record for every
// head that began. A real net/http.Server answers most of the corpus
// itself, or closes without a word, and never calls its handler, so no
// record could be written; and it reads the smuggling shapes (CL and TE,
// TE on HTTP/1.0, obs-fold, bare LF) that egressd refuses. http1 hands
// every one of them to Handler.Refused with the status to answer.
func TestStdlibServerAnswersBadHeadsWithoutHandler(t *testing.T) {
	var called atomic.Int64
	std := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			called.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
		}),
		MaxHeaderBytes: 1 << 10, ReadHeaderTimeout: headTimeout,
		ErrorLog: log.New(io.Discard, "", 0),
	}
	stdLn := listenLoopback(t)
	go std.Serve(stdLn)
	t.Cleanup(func() { std.Close() })

	th := &testHandler{refused: make(chan *HeadError, 1), heads: make(chan *Head, 1)}
	own, err := New(listenLoopback(t), Config{Handler: th, MaxHeaderBytes: 1 << 10, HeaderTimeout: headTimeout})
	if err != nil {
		t.Fatal(err)
	}
	go own.Serve()
	t.Cleanup(own.Close)
	ownAddr := own.ln.Addr().String()

	for _, tc := range badHeads {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("net/http", func(t *testing.T) {
				before := called.Load()
				status := exchangeRaw(t, stdLn.Addr().String(), tc.raw, tc.slow)
				handler := called.Load() > before
				if status != tc.stdStatus || handler != tc.stdHandler {
					t.Errorf("net/http answered %d, handler called %v; want %d, %v", status, handler, tc.stdStatus, tc.stdHandler)
				}
			})
			t.Run("http1", func(t *testing.T) {
				status := exchangeRaw(t, ownAddr, tc.raw, tc.slow)
				select {
				case he := <-th.refused:
					if he.Status != tc.ownStatus || status != tc.ownStatus {
						t.Errorf("Refused with %d (%v), answered %d; want %d", he.Status, he, status, tc.ownStatus)
					}
					if he.Method == "" || he.N == 0 {
						t.Errorf("Refused without what was read: method %q, %d bytes", he.Method, he.N)
					}
				case h := <-th.heads:
					t.Errorf("http1 accepted the head: %+v", h)
				case <-time.After(10 * time.Second): // a hang guard only
					t.Error("no Handler callback")
				}
			})
		})
	}
	t.Run("a clean head reaches both handlers", func(t *testing.T) {
		before := called.Load()
		if s := exchangeRaw(t, stdLn.Addr().String(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false); s != 200 || called.Load() == before {
			t.Errorf("net/http: %d", s)
		}
		if s := exchangeRaw(t, ownAddr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false); s != 200 {
			t.Errorf("http1: %d", s)
		}
		if h := <-th.heads; h.Host != "a" {
			t.Errorf("http1 head %+v", h)
		}
	})
}

// testHandler answers every head 200 through a ServedRequest and every refused
// head with its status, and reports each callback.
type testHandler struct {
	refused chan *HeadError
	heads   chan *Head
}

func (th *testHandler) Open(net.Conn) (func(), bool) { return nil, true }

func (th *testHandler) Head(c *Conn, h *Head) {
	var req http.Request
	x := c.Begin(context.Background(), h, &url.URL{Path: "/"}, &req)
	_, _ = io.Copy(io.Discard, req.Body)
	x.ResponseWriter().Header().Set("Content-Length", "0")
	x.ResponseWriter().WriteHeader(http.StatusOK)
	x.Finish(false)
	th.heads <- h
}

func (th *testHandler) Refused(c *Conn, e *HeadError) {
	if e.Status != 0 {
		b := AppendStatusLine(nil, e.Status)
		b = append(b, "Content-Length: 0\r\nConnection: close\r\n\r\n"...)
		_, _ = c.NetConn().Write(b)
	}
	th.refused <- e
}
