package http1

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// ServedRequest is one plain HTTP request being served on a Conn: its
// ResponseWriter and the end of the request. What the request holds
// (body, context, the client watch) lives on the Conn, one exchange at a
// time, so that a ServedRequest costs one allocation of a ResponseWriter's
// size.
type ServedRequest struct {
	w ResponseWriter
}

// Begin starts serving head as a plain request and fills req as net/http's
// server would build it: URL u (the target the handler parsed), its
// context a child of parent (cancelled when the client leaves, and by
// Finish), its body as the client framed it (100 Continue sent before the
// first read when asked). req is the caller's, so that it can live on the
// caller's stack (a request the handler only reads or clones costs no
// allocation); Begin keeps no reference to it. Call Finish after.
func (c *Conn) Begin(parent context.Context, h *Head, u *url.URL, req *http.Request) *ServedRequest {
	// The body has no deadline (as with net/http's ReadTimeout 0): an
	// upload takes what it takes.
	_ = c.c.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(parent)
	hdr := h.Header
	if hdr == nil {
		hdr = http.Header{} // a CONNECT served as a plain request
	}
	r := &http.Request{
		Method: h.Method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: h.Minor,
		Header: hdr, Host: h.Host, RequestURI: h.Target, Close: h.Close,
		Body: http.NoBody, RemoteAddr: c.c.RemoteAddr().String(),
	}
	if h.Minor == 0 {
		r.Proto = "HTTP/1.0"
	}
	if u.IsAbs() && u.Host != "" {
		r.Host = u.Host // as net/http: the absolute URI's authority wins over Host
	}
	var body *requestBody
	switch {
	case h.Chunked:
		body = &requestBody{c: c, r: httputil.NewChunkedReader(c.br), chunked: true, expect: h.Expect}
		r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
	case h.ContentLength > 0:
		body = &requestBody{c: c, r: io.LimitReader(c.br, h.ContentLength), left: h.ContentLength, expect: h.Expect}
		r.ContentLength = h.ContentLength
	}
	if body != nil {
		body.max = c.s.cfg.MaxHeaderBytes
		r.Body = body
	}
	*req = *r.WithContext(ctx) // inlined: both copies stay on the stack
	x := &ServedRequest{}
	x.w.init(c, h)
	c.x, c.body, c.stopped = x, body, false
	c.beginRequest(cancel, body == nil)
	return x
}

// ResponseWriter is where the response goes; it is an http.Flusher.
func (x *ServedRequest) ResponseWriter() *ResponseWriter { return &x.w }

// ClientGone ends the watch for a client that leaves and reports whether
// it left while the request ran.
func (x *ServedRequest) ClientGone() bool {
	c := x.w.c
	if !c.stopped {
		c.stopped = true
		c.gone = c.endRequest()
	}
	return c.gone
}

// Finish ends the exchange and reports whether the connection may carry
// another request. A broken exchange (the upstream failed inside its body,
// the handler panicked or was cut; a client that left or a failed write
// count too) is not completed: the client must see a truncated response,
// never a complete-looking one, so the connection closes without the last
// chunk. The request's context is cancelled.
func (x *ServedRequest) Finish(broken bool) bool {
	c := x.w.c
	broken = x.ClientGone() || broken || x.w.err != nil
	x.w.finish(broken)
	c.reqCancel()
	readerFree := c.body == nil || c.body.eof.Load()
	c.x, c.body = nil, nil
	c.readerBusy = !readerFree
	c.keep = readerFree && !broken && !x.w.head.Close && !x.w.close
	return c.keep
}
