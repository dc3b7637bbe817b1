package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// connectEstablished is the answer to an admitted CONNECT (RFC 9110 §9.3.6).
var connectEstablished = []byte("HTTP/1.1 200 Connection established\r\n\r\n")

// serveConnect decides and dials a CONNECT, answers 200 and starts the
// tunnel; a refusal is answered and the connection closed. hijacked is true when the tunnel took the connection
// (and its limit slot) over; the connection's reader has then gone back to
// its pool already.
func (p *Proxy) serveConnect(hc *httpConn, head *requestHead) (readerFree, hijacked bool) {
	ex := p.newExchangeFrom(record.KindConnect, hc.src)
	ex.rec.HTTP = &record.HTTP{Method: http.MethodConnect}
	ex.rec.Probe = head.probe
	refuse := func(rf *refusal) (bool, bool) {
		_, _ = hc.c.Write(appendRefusal(nil, ex, rf))
		ex.finish(rf.err)
		return true, false
	}
	host, port, absolute, err := connectTarget(head.target)
	if err != nil {
		ex.port = port
		return refuse(p.badRequest(ex, host, err))
	}
	if rf := p.admit(ex, host, port); rf != nil {
		return refuse(rf)
	}
	if absolute {
		// The decision above named the host the URI names (a metadata
		// address is refused as metadata); allowed or not, an absolute
		// URI is no CONNECT target (RFC 9112 §3.2.3).
		d := ex.decide(policy.Denied(policy.ReasonBadRequest))
		return refuse(deny(http.StatusBadRequest, d, errors.New("CONNECT target is an absolute URI, want host:port")))
	}
	// The dial ends at the drain deadline; each address is bounded by
	// DialTimeout. No context of its own: a client that leaves meanwhile
	// is seen when the 200 is written.
	up, rf := p.dialGuarded(p.cutCtx, ex)
	if rf != nil {
		if ex.decision().Allowed() && p.cutCtx.Err() != nil {
			ex.outcome = record.OutcomeDrained // the drain deadline ended the dial
		}
		return refuse(rf)
	}
	t := newTunnel(p, hc.c)
	t.ex = ex
	t.upstream = up
	if !p.track(t) {
		up.Close()
		return refuse(ex.upstreamFailure(http.StatusServiceUnavailable, record.OutcomeDrained, ErrClosed))
	}
	t.release = hc.release // the tunnel frees the slot with the connection
	hc.s.forget(hc)
	var pre []byte
	if n := hc.br.Buffered(); n > 0 {
		// A client that sent its ClientHello with the CONNECT (no wait
		// for the 200): the tunnel reads it first.
		b, _ := hc.br.Peek(n)
		pre = append([]byte(nil), b...)
	}
	// An idle tunnel holds no read buffer.
	hc.br.Reset(nil)
	readerPool.Put(hc.br)
	hc.br = nil
	if _, err := hc.c.Write(connectEstablished); err != nil {
		// Cut at the drain deadline or the client left: no relay; end
		// closes both sides and writes the record.
		t.fail(err)
		t.pending.Store(1)
		t.runDirection(func() {})
		return false, true
	}
	// Both directions in new goroutines: this one's stack grew through
	// the head, the lookup and the dial, and an idle tunnel would keep it.
	t.start(pre, nil, ex.host, false)
	return false, true
}

// serveRequest serves one plain HTTP request of hc: absolute-form on the
// proxy listener, Host-based on a Host listener. keep says whether the
// connection may carry another request; readerFree whether no body read
// can still be in flight on its reader.
func (p *Proxy) serveRequest(hc *httpConn, head *requestHead) (keep, readerFree bool) {
	ex := p.newExchangeFrom(record.KindHTTP, hc.src)
	ex.rec.Probe = head.probe
	ex.rec.HTTP = &record.HTTP{Method: head.method}
	// The body has no deadline (as with net/http's ReadTimeout 0): an
	// upload takes what it takes.
	_ = hc.c.SetReadDeadline(time.Time{})
	u, err := url.ParseRequestURI(head.target)
	if err != nil {
		rf := p.badRequest(ex, authorityHost(head.target, false), err)
		_, _ = hc.c.Write(appendRefusal(nil, ex, rf))
		ex.finish(err)
		return false, true
	}
	if p.cfg.AuditHTTPPath == HTTPPathFull {
		ex.rec.HTTP.Path = audit.RedactPath(u)
	}
	ctx, cancel := context.WithCancel(p.cutCtx)
	defer cancel()
	req := &http.Request{
		Method: head.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: head.minor,
		Header: head.fields, Host: head.host, RequestURI: head.target, Close: head.close,
		Body: http.NoBody, RemoteAddr: hc.c.RemoteAddr().String(),
	}
	if head.minor == 0 {
		req.Proto = "HTTP/1.0"
	}
	if u.IsAbs() && u.Host != "" {
		req.Host = u.Host // as net/http: the absolute URI's authority wins over Host
	}
	var body *requestBody
	switch {
	case head.chunked:
		body = &requestBody{hc: hc, r: httputil.NewChunkedReader(hc.br), chunked: true, expect: head.expect}
		req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	case head.contentLength > 0:
		body = &requestBody{hc: hc, r: io.LimitReader(hc.br, head.contentLength), left: head.contentLength, expect: head.expect}
		req.ContentLength = head.contentLength
	}
	if body != nil {
		body.max = p.cfg.MaxHeaderBytes
		req.Body = body
	}
	req = req.WithContext(ctx)
	w := newResponseWriter(hc, head)
	hc.beginRequest(cancel, body == nil)

	var v any
	func() {
		defer func() { v = recover() }()
		if hc.s.port == 0 {
			p.handleProxy(w, req, ex)
		} else {
			p.handleTransparentHTTP(w, req, ex, hc.s.port)
		}
	}()
	gone := hc.endRequest()
	cut := p.cutCtx.Err() != nil && ctx.Err() != nil
	broken := ex.upstreamBroken() || w.err != nil || gone || cut || v != nil
	w.finish(broken)
	switch {
	case cut:
		// Still running at the drain deadline: whatever failed followed
		// from the cut.
		ex.outcome = record.OutcomeDrained
		ex.rec.Error = ErrCut.Error()
	case v == http.ErrAbortHandler:
		// ReverseProxy's way to say the response could not be completed.
		if ex.rec.Error == "" {
			ex.rec.Error = "aborted while copying the response"
		}
	case v != nil:
		p.log.Error("proxy: panic in handler", "panic", v, "kind", ex.rec.Kind)
		ex.rec.Error = fmt.Sprintf("internal error: %v", v)
	case gone && ex.rec.Error == "":
		ex.rec.Error = "client aborted"
	}
	ex.finish(nil)
	readerFree = body == nil || body.eof.Load()
	return readerFree && !broken && !head.close && !w.close, readerFree
}

// handleProxy serves an absolute-form HTTP request on the proxy listener.
func (p *Proxy) handleProxy(w http.ResponseWriter, r *http.Request, ex *exchange) {
	switch {
	case !r.URL.IsAbs():
		p.refuseBadRequest(w, ex, r.Host, errors.New("not a proxy request: absolute-form or CONNECT required"))
		return
	case r.URL.Scheme != "http":
		// https:// in absolute form would make egressd the TLS client and
		// hide the pod's handshake; clients must use CONNECT (curl, Go and
		// Python do for https:// through HTTPS_PROXY).
		p.refuseBadRequest(w, ex, r.URL.Hostname(), fmt.Errorf("scheme %q in absolute-form: use CONNECT", r.URL.Scheme))
		return
	}
	host, port, err := requestHost(r.URL.Host, 80)
	if err != nil {
		p.refuseBadRequest(w, ex, host, err)
		return
	}
	p.forward(w, r, ex, host, port)
}

// handleTransparentHTTP serves a request on a Host listener: the
// destination is the Host header's name (or an absolute URI's) and the
// listener's port.
func (p *Proxy) handleTransparentHTTP(w http.ResponseWriter, r *http.Request, ex *exchange, port int) {
	if r.Method == http.MethodConnect || r.URL.IsAbs() && r.URL.Scheme != "http" {
		p.refuseBadRequest(w, ex, r.Host, errors.New("not a plain HTTP request"))
		return
	}
	host, _, err := requestHost(r.Host, port)
	if err != nil || host == "" {
		if err == nil {
			err = errors.New("missing host")
		}
		p.refuseBadRequest(w, ex, host, err)
		return
	}
	p.forward(w, r, ex, host, port)
}
