package inspect

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/egressd/egressd/internal/http1"
)

// setRawOrigin makes the harness dial a TLS listener of its own (the
// origin CA's certificate for testHost, ALPN h2 or http/1.1) whose every
// connection serve answers by hand: an origin that sends what no
// net/http server would, in constant memory of its own, so that what the
// test process allocates is the engine's.
func (h *harness) setRawOrigin(t *testing.T, serve func(*tls.Conn)) {
	t.Helper()
	chain, key := h.originCA.issue(t, nil, testHost)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() == nil {
					serve(tc)
				}
			}()
		}
	}()
	h.mu.Lock()
	h.upstreamAddr = ln.Addr().String()
	h.mu.Unlock()
}

// repeat writes n bytes of b's pattern to w in b-sized writes; errors
// (egressd closed the connection) end it.
func repeat(w io.Writer, b []byte, n int) {
	for ; n > 0; n -= len(b) {
		if _, err := w.Write(b[:min(len(b), n)]); err != nil {
			return
		}
	}
}

// bigHead is the 24 MiB of the outside attack suite's head.
const bigHead = 24 << 20

// h1Origin answers each request on an HTTP/1.1 connection with what
// respond writes (after the request's head).
func h1Origin(respond func(w io.Writer)) func(*tls.Conn) {
	return func(c *tls.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			bw := bufio.NewWriterSize(c, 64<<10)
			respond(bw)
			if bw.Flush() != nil {
				return
			}
		}
	}
}

// h2Origin answers stream 1 of an HTTP/2 connection: a HEADERS frame
// with :status 200 and then fields, CONTINUATION frames of 16,000-byte
// fields until n bytes were sent, then (trailer) an empty DATA frame and
// the same as trailers, or END_STREAM on the head.
func h2Origin(n int, trailer bool) func(*tls.Conn) {
	return func(c *tls.Conn) {
		fr := awaitH2Request(c)
		if fr == nil {
			return
		}
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		value := strings.Repeat("a", 16000)
		block := func(first bool, fields int) error {
			buf.Reset()
			if first {
				enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			}
			if trailer == first {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: !trailer})
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: buf.Bytes(), EndStream: !first}); err != nil {
				return err
			}
			for i := 0; i < fields; i++ {
				buf.Reset()
				enc.WriteField(hpack.HeaderField{Name: "x-big", Value: value, Sensitive: true})
				if err := fr.WriteContinuation(1, i == fields-1, buf.Bytes()); err != nil {
					return err
				}
			}
			return nil
		}
		if block(true, n/16000) != nil || !trailer {
			io.Copy(io.Discard, c)
			return
		}
		fr.WriteData(1, false, []byte("ok"))
		block(false, n/16000)
		io.Copy(io.Discard, c)
	}
}

// awaitH2Request plays an HTTP/2 origin on c up to the client's first
// request: its preface read, SETTINGS sent and acknowledged, the first
// HEADERS frame read. Nil when the connection failed first.
func awaitH2Request(c net.Conn) *http2.Framer {
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return nil
	}
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return nil
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			fr.WriteSettingsAck()
		}
		if _, ok := f.(*http2.HeadersFrame); ok {
			return fr
		}
	}
}

// TestResponseHeadBounded: whatever an allowed origin sends as a response
// head, inside an inspected tunnel egressd reads at most the response head
// limit of it (4 × the request head limit): a 24 MiB head is answered 502
// upstream-error with the one error class, and the test process allocates
// a small constant, not the head. The neighbours (many small fields,
// endless 1xx heads, a long trailer, a long chunk extension, HTTP/2
// trailers) are bounded too; a head under the limit passes.
func TestResponseHeadBounded(t *testing.T) {
	field := []byte(strings.Repeat("a", 64<<10))
	tests := []struct {
		name      string
		h2        bool
		origin    func(*tls.Conn)
		status    int  // 0: the response is cut (the client's read fails)
		tooLarge  bool // recorded as the head-too-large class
		maxAllocs int  // MiB the test process may allocate for the exchange
	}{
		{"HTTP/1.1 one 24 MiB field", false, h1Origin(func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: ")
			repeat(w, field, bigHead)
			io.WriteString(w, "\r\nContent-Length: 0\r\n\r\n")
		}), 502, true, 4},
		{"HTTP/1.1 24 MiB of small fields", false, h1Origin(func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\n")
			repeat(w, bytes.Repeat([]byte("X-Small: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"), 1000), bigHead)
			io.WriteString(w, "Content-Length: 0\r\n\r\n")
		}), 502, true, 4},
		{"HTTP/1.1 endless 103 Early Hints", false, h1Origin(func(w io.Writer) {
			repeat(w, bytes.Repeat([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"), 1000), bigHead)
			io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}), 502, true, 4},
		{"HTTP/1.1 24 MiB trailer", false, h1Origin(func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Big\r\n\r\n2\r\nok\r\n0\r\nX-Big: ")
			repeat(w, field, bigHead)
			io.WriteString(w, "\r\n\r\n")
		}), 0, false, 4},
		{"HTTP/1.1 24 MiB chunk extension", false, h1Origin(func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=")
			repeat(w, field, bigHead)
			io.WriteString(w, "\r\nok\r\n0\r\n\r\n")
		}), 0, false, 4},
		{"HTTP/1.1 head under the limit", false, h1Origin(func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Big: ")
			repeat(w, field, 40<<10)
			io.WriteString(w, "\r\nContent-Length: 2\r\n\r\nok")
		}), 200, false, 4},
		{"HTTP/2 24 MiB header list", true, h2Origin(bigHead, false), 502, true, 4},
		{"HTTP/2 24 MiB trailers", true, h2Origin(bigHead, true), 0, true, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			h.setRawOrigin(t, tt.origin)
			client := h.goClient(tt.h2)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resp, err := client.Get(h.originURL("/v1/models"))
			status := 0
			if err == nil {
				status = resp.StatusCode
				if _, err = io.Copy(io.Discard, resp.Body); err != nil {
					status = 0
				}
				resp.Body.Close()
			}
			client.CloseIdleConnections()
			h.wait()
			runtime.ReadMemStats(&after)
			if status != tt.status {
				t.Errorf("status %d (%v); want %d", status, err, tt.status)
			}
			if mib := (after.TotalAlloc - before.TotalAlloc) >> 20; mib > uint64(tt.maxAllocs) {
				t.Errorf("the exchange allocated %d MiB; want at most %d", mib, tt.maxAllocs)
			}
			xs := h.exchangesFor("GET")
			if len(xs) != 1 {
				t.Fatalf("%d exchanges recorded; want 1", len(xs))
			}
			x := xs[0]
			if x.HeadTooLarge != tt.tooLarge {
				t.Errorf("HeadTooLarge %v (error %q); want %v", x.HeadTooLarge, x.Error, tt.tooLarge)
			}
			if tt.tooLarge && (tt.status != 0 && x.Status != 502 || !strings.HasPrefix(x.Error, http1.ErrResponseHeadTooLarge.Error()+": ")) {
				t.Errorf("recorded %d %q; want 502 and the class %q", x.Status, x.Error, http1.ErrResponseHeadTooLarge)
			}
		})
	}
}

// TestH2HeadTooLargeText holds the text h2HeadTooLarge matches to
// x/net/http2's: a client connection that advertises a small header list
// limit gets that error for a response over it.
func TestH2HeadTooLargeText(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	go func() {
		fr := awaitH2Request(c2)
		if fr == nil {
			return
		}
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		for range 60 {
			enc.WriteField(hpack.HeaderField{Name: "x-big", Value: strings.Repeat("a", 100), Sensitive: true})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: buf.Bytes(), EndHeaders: true, EndStream: true})
		io.Copy(io.Discard, c2)
	}()
	cc, err := (&http2.Transport{MaxHeaderListSize: 4096}).NewClientConn(c1)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://"+testHost+"/", nil)
	_, err = cc.RoundTrip(req)
	if !h2HeadTooLarge(err) {
		t.Fatalf("RoundTrip: %v; want x/net's header list error", err)
	}
	if errors.Is(err, http1.ErrResponseHeadTooLarge) {
		t.Fatal("x/net's error is already the class")
	}
}
