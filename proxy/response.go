package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The plain HTTP half of httpServer: the request body a handler reads, the
// response writer it writes to, and the watch for a client that leaves
// while its request runs. Together they do for httputil.ReverseProxy what
// net/http's server did: framing (Content-Length, chunked, or close for
// HTTP/1.0), 100 Continue, keep-alive, and a cancelled request context when
// the client goes away.

// requestBody is a request's body as the client framed it. It is read by
// the Transport's goroutine, which may outlive the handler: after Close a
// Read fails, and the connection's reader is reused only once the body was
// read to its end (eof), so no read can be in flight on it.
type requestBody struct {
	hc      *httpConn
	r       io.Reader
	chunked bool
	left    int64 // Content-Length bytes not read yet
	max     int   // bound of a chunked body's trailer section
	expect  bool  // send 100 Continue before the first read

	closed atomic.Bool
	eof    atomic.Bool
	err    error // sticky; only the reading goroutine touches it
}

var errBodyClosed = errors.New("proxy: read of a closed request body")

func (b *requestBody) Read(p []byte) (int, error) {
	if b.eof.Load() {
		return 0, io.EOF
	}
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		if err := b.hc.writeContinue(); err != nil {
			b.err = err
			return 0, err
		}
	}
	n, err := b.r.Read(p)
	if !b.chunked {
		b.left -= int64(n)
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF
		}
		if b.left == 0 && err == nil {
			err = io.EOF
		}
	} else if err == io.EOF {
		err = b.readTrailer()
	}
	switch {
	case err == io.EOF:
		b.eof.Store(true) // after the last use of the reader
		b.hc.watchClient()
	case err != nil:
		b.err = err
	}
	return n, err
}

// readTrailer skips a chunked body's trailer section (RFC 9112 §7.1.2):
// trailers are not forwarded. io.EOF when it ended well.
func (b *requestBody) readTrailer() error {
	n := 0
	for {
		line, err := b.hc.br.ReadSlice('\n')
		n += len(line)
		switch {
		case err != nil:
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("proxy: chunked trailer: %w", err)
		case n > b.max:
			return fmt.Errorf("proxy: chunked trailer over %d bytes", b.max)
		case len(line) == 2 && line[0] == '\r':
			return io.EOF
		}
	}
}

func (b *requestBody) Close() error {
	b.closed.Store(true)
	return nil
}

// writeContinue answers 100 Continue before the body is read (RFC 9110
// §10.1.1), unless the response has begun.
func (hc *httpConn) writeContinue() error {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	if hc.started {
		return nil
	}
	_, err := io.WriteString(hc.c, "HTTP/1.1 100 Continue\r\n\r\n")
	return err
}

// beginRequest arms the watch for a client that leaves: at once when the
// request has no body, else when its body has been read to the end (a
// read of the connection before that would take body bytes).
func (hc *httpConn) beginRequest(cancel context.CancelFunc, noBody bool) {
	hc.bgMu.Lock()
	hc.reqCancel, hc.bgEnded, hc.bgDone = cancel, false, nil
	hc.bgGone.Store(false)
	hc.started = false
	hc.bgMu.Unlock()
	if noBody {
		hc.watchClient()
	}
}

// watchClient reads ahead one byte while the request runs: an error (EOF,
// reset) means the client left, and the request's context is cancelled so
// that its upstream request ends too; a byte is the next pipelined request
// and stays buffered.
func (hc *httpConn) watchClient() {
	hc.bgMu.Lock()
	defer hc.bgMu.Unlock()
	if hc.bgEnded || hc.bgDone != nil {
		return
	}
	if err := hc.c.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	done := make(chan struct{})
	hc.bgDone = done
	cancel := hc.reqCancel
	go func() {
		defer close(done)
		if _, err := hc.br.Peek(1); err != nil && !hc.bgAbort.Load() {
			hc.bgGone.Store(true)
			cancel()
		}
	}()
}

// endRequest stops the watch and reports whether the client left.
func (hc *httpConn) endRequest() bool {
	hc.bgMu.Lock()
	hc.bgEnded = true
	done := hc.bgDone
	hc.bgMu.Unlock()
	if done != nil {
		hc.bgAbort.Store(true)
		_ = hc.c.SetReadDeadline(aLongTimeAgo)
		<-done
		hc.bgAbort.Store(false)
	}
	return hc.bgGone.Load()
}

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// responseWriter writes one response of an httpConn.
type responseWriter struct {
	hc     *httpConn
	head   *requestHead
	bw     *bufio.Writer
	header http.Header

	wrote   bool
	bodyOK  bool  // the response has a body (not HEAD, 204, 304)
	chunked bool  // framed with chunked coding
	cl      int64 // declared Content-Length; -1: none
	n       int64 // body bytes written
	close   bool  // the connection closes after this response
	err     error // first write error towards the client
}

func newResponseWriter(hc *httpConn, head *requestHead) *responseWriter {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(hc.c)
	return &responseWriter{hc: hc, head: head, bw: bw, header: make(http.Header), cl: -1}
}

func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader writes the status line and header. 1xx answers (other than
// 101: nothing is upgraded here) are written at once and may repeat.
func (w *responseWriter) WriteHeader(code int) {
	if w.wrote || code < 100 || code > 999 {
		return
	}
	w.hc.wmu.Lock()
	defer w.hc.wmu.Unlock()
	if code < 200 {
		if code == http.StatusSwitchingProtocols {
			return
		}
		w.writeHead(code)
		w.flush()
		return
	}
	w.hc.started = true
	w.wrote = true
	h := w.header
	w.bodyOK = w.head.method != http.MethodHead && code != http.StatusNoContent && code != http.StatusNotModified
	if v := h.Get("Content-Length"); v != "" {
		if n, ok := parseContentLength([]byte(v)); ok && code != http.StatusNoContent {
			w.cl = n
		} else {
			h.Del("Content-Length")
		}
	}
	h.Del("Transfer-Encoding")
	h.Del("Connection")
	if w.cl < 0 && w.bodyOK {
		if w.head.minor == 1 {
			w.chunked = true
		} else {
			w.close = true // HTTP/1.0: the end of the body is the close
		}
	}
	if w.head.close || w.hc.s.p.Draining() {
		w.close = true
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	w.writeHead(code)
}

// writeHead writes a status line and the header; wmu is held.
func (w *responseWriter) writeHead(code int) {
	var b [64]byte
	line := append(b[:0], "HTTP/1.1 "...)
	line = strconv.AppendInt(line, int64(code), 10)
	line = append(line, ' ')
	line = append(line, statusText(code)...)
	line = append(line, "\r\n"...)
	w.write(line)
	if err := w.header.Write(w.bw); err != nil && w.err == nil {
		w.err = err
	}
	if code >= 200 {
		switch {
		case w.chunked:
			w.write([]byte("Transfer-Encoding: chunked\r\n"))
		}
		switch {
		case w.close:
			w.write([]byte("Connection: close\r\n"))
		case w.head.minor == 0:
			w.write([]byte("Connection: keep-alive\r\n"))
		}
	}
	w.write([]byte("\r\n"))
}

func (w *responseWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(p); err != nil {
		w.err = err
	}
}

func (w *responseWriter) flush() {
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = err
		}
	}
}

// Write writes body bytes in the response's framing.
func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyOK {
		if w.head.method == http.MethodHead {
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if len(p) == 0 {
		return 0, w.err
	}
	short := false
	if w.cl >= 0 && w.n+int64(len(p)) > w.cl {
		p, short = p[:w.cl-w.n], true
	}
	if w.chunked {
		var b [20]byte
		w.write(strconv.AppendInt(b[:0], int64(len(p)), 16))
		w.write([]byte("\r\n"))
		w.write(p)
		w.write([]byte("\r\n"))
	} else {
		w.write(p)
	}
	if w.err != nil {
		return 0, w.err
	}
	w.n += int64(len(p))
	if short {
		return len(p), http.ErrContentLength
	}
	return len(p), nil
}

// Flush sends what is buffered (ReverseProxy flushes after every write:
// token streams reach the client as they come).
func (w *responseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.flush()
}

// finish ends the response. A broken exchange (the upstream failed inside
// its body, the client left, the drain cut it) is not completed: the
// client must see a truncated response, never a complete-looking one, so
// the connection closes without the last chunk.
func (w *responseWriter) finish(broken bool) {
	defer func() {
		w.bw.Reset(nil)
		writerPool.Put(w.bw)
		w.bw = nil
	}()
	if broken {
		w.close = true
		if w.wrote {
			w.flush()
		}
		return
	}
	if !w.wrote {
		w.header.Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}
	if w.chunked {
		w.write([]byte("0\r\n\r\n"))
	}
	if w.bodyOK && w.cl >= 0 && w.n < w.cl {
		w.close = true // fewer bytes than announced: the close tells
	}
	w.flush()
	if w.err != nil {
		w.close = true
	}
}
