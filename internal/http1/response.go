package http1

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// ResponseWriter writes one response of a Conn, framed for the client:
// Content-Length when the handler declared it, else chunked for HTTP/1.1
// or the close for HTTP/1.0; keep-alive unless the request, the response
// or a Shutdown says close.
type ResponseWriter struct {
	c      *Conn
	head   *Head
	bw     *bufio.Writer
	header http.Header

	wrote   bool
	bodyOK  bool   // the response has a body (not HEAD, 204, 304)
	chunked bool   // framed with chunked coding
	cl      int64  // declared Content-Length; -1: none
	n       int64  // body bytes written
	close   bool   // the connection closes after this response
	err     error  // first write error towards the client
	reason  string // egressd's own response: the reason phrase's words (SetRefusal)
}

func (w *ResponseWriter) init(c *Conn, h *Head) {
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(c.c)
	*w = ResponseWriter{c: c, head: h, bw: bw, header: make(http.Header), cl: -1}
}

// NetConn is the client connection under the response (revocation resets
// it).
func (w *ResponseWriter) NetConn() net.Conn { return w.c.c }

// Err is the first error writing to the client.
func (w *ResponseWriter) Err() error { return w.err }

func (w *ResponseWriter) Header() http.Header { return w.header }

// WriteHeader writes the status line and header. 1xx answers (other than
// 101: nothing is upgraded here) are written at once and may repeat.
func (w *ResponseWriter) WriteHeader(code int) {
	if w.wrote || code < 100 || code > 999 {
		return
	}
	w.c.wmu.Lock()
	defer w.c.wmu.Unlock()
	if code < 200 {
		if code == http.StatusSwitchingProtocols {
			return
		}
		w.writeHead(code)
		w.flush()
		return
	}
	w.c.started = true
	w.wrote = true
	h := w.header
	w.bodyOK = w.head.Method != http.MethodHead && code != http.StatusNoContent && code != http.StatusNotModified
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
		if w.head.Minor == 1 {
			w.chunked = true
		} else {
			w.close = true // HTTP/1.0: the end of the body is the close
		}
	}
	if w.head.Close || w.c.s.shutting.Load() {
		w.close = true
	}
	if h.Get("Date") == "" {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	w.writeHead(code)
}

// writeHead writes a status line and the header; wmu is held.
func (w *ResponseWriter) writeHead(code int) {
	var b [96]byte // the longest status line with a reason phrase fits
	reason := ""
	if code >= 200 {
		reason = w.reason
	}
	w.write(appendStatusLine(b[:0], code, reason))
	if err := w.header.Write(w.bw); err != nil && w.err == nil {
		w.err = err
	}
	if code >= 200 {
		if w.chunked {
			w.write([]byte("Transfer-Encoding: chunked\r\n"))
		}
		switch {
		case w.close:
			w.write([]byte("Connection: close\r\n"))
		case w.head.Minor == 0:
			w.write([]byte("Connection: keep-alive\r\n"))
		}
	}
	w.write([]byte("\r\n"))
}

func (w *ResponseWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(p); err != nil {
		w.err = err
	}
}

func (w *ResponseWriter) flush() {
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = err
		}
	}
}

// Write writes body bytes in the response's framing.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyOK {
		if w.head.Method == http.MethodHead {
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

// Flush sends what is buffered (a reverse proxy that flushes after every
// write: token streams reach the client as they come).
func (w *ResponseWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.flush()
}

// finish ends the response (ServedRequest.Finish).
func (w *ResponseWriter) finish(broken bool) {
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
