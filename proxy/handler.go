package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// connectEstablished is the answer to an admitted CONNECT (RFC 9110 §9.3.6).
var connectEstablished = []byte("HTTP/1.1 200 Connection established\r\n\r\n")

// serveConnect decides and dials a CONNECT, answers 200 and starts the
// tunnel, which takes the connection (and its limit slot) over; a refusal
// is answered and the connection closes.
func (p *Proxy) serveConnect(c *http1.Conn, head *http1.Head) {
	nc := c.NetConn()
	ex := p.newExchange(record.KindConnect, admit.SourceAddr(nc.RemoteAddr()))
	ex.rec.HTTP = &record.HTTP{Method: http.MethodConnect}
	ex.rec.Probe = sanitizeProbe(head.Captured)
	refuse := func(rf *refusal) {
		_, _ = nc.Write(appendRefusal(nil, ex, rf))
		ex.finish(rf.after, rf.err)
	}
	host, port, absolute, err := http1.ConnectTarget(head.Target)
	if err != nil {
		ex.port = port
		refuse(p.badRequest(ex, host, err))
		return
	}
	if rf := p.admit(ex, host, port); rf != nil {
		refuse(rf)
		return
	}
	if absolute {
		// The decision above named the host the URI names (a metadata
		// address is refused as metadata); allowed or not, an absolute
		// URI is no CONNECT target (RFC 9112 §3.2.3).
		d := ex.fold(policy.Denied(policy.ReasonBadRequest))
		refuse(deny(http.StatusBadRequest, d, errors.New("CONNECT target is an absolute URI, want host:port")))
		return
	}
	// The dial ends at the drain deadline; each address is bounded by
	// DialTimeout. No context of its own: a client that leaves meanwhile
	// is seen when the 200 is written.
	up, rf := p.dialGuarded(p.cutCtx, ex)
	if rf != nil {
		refuse(rf)
		return
	}
	t := newTunnel(p, nc, ex)
	t.upstream = up
	if !p.track(t) {
		up.Close()
		refuse(failure(http.StatusServiceUnavailable, record.OutcomeDrained, ErrClosed))
		return
	}
	// pre: a client that sent its ClientHello with the CONNECT (no wait
	// for the 200); the tunnel reads it first. The tunnel frees the slot
	// with the connection.
	_, release, pre := c.Hijack()
	t.release = release
	if _, err := nc.Write(connectEstablished); err != nil {
		// Cut at the drain deadline or the client left: no relay; end
		// closes both sides and writes the record.
		t.fail(err)
		t.pending.Store(1)
		t.runDirection(func() {})
		return
	}
	// Both directions in new goroutines: this one's stack grew through
	// the head, the lookup and the dial, and an idle tunnel would keep it.
	t.start(pre, nil, ex.host, false)
}

// serveRequest serves one plain HTTP request of c: absolute-form on the
// proxy listener (port 0), Host-based on a Host listener. internal/http1
// frames it (Conn.Begin, ServedRequest.Finish); the handler decides and
// forwards it.
func (p *Proxy) serveRequest(c *http1.Conn, head *http1.Head, port int) {
	nc := c.NetConn()
	ex := p.newExchange(record.KindHTTP, admit.SourceAddr(nc.RemoteAddr()))
	ex.rec.Probe = sanitizeProbe(head.Captured)
	ex.rec.HTTP = &record.HTTP{Method: head.Method}
	u, err := url.ParseRequestURI(head.Target)
	if err != nil {
		rf := p.badRequest(ex, http1.AuthorityHost(head.Target, false), err)
		_, _ = nc.Write(appendRefusal(nil, ex, rf))
		ex.finish("", err)
		return
	}
	if p.cfg.AuditHTTPPath == HTTPPathFull {
		ex.rec.HTTP.Path = audit.RedactPath(u)
	}
	var req http.Request // on this stack: ReverseProxy only clones it
	x := c.Begin(p.cutCtx, head, u, &req)
	w := x.ResponseWriter()

	var v any
	func() {
		defer func() { v = recover() }()
		if port == 0 {
			p.handleProxy(w, &req, ex)
		} else {
			p.handleTransparentHTTP(w, &req, ex, port)
		}
	}()
	gone := x.ClientGone()
	left := req.Context().Err() != nil
	// Still running at the drain deadline: whatever failed followed from
	// the cut.
	cut := p.cutCtx.Err() != nil && left
	x.Finish(ex.upstreamBroken() || cut || v != nil)
	after := ex.forwardedAfter(cut, left)
	switch {
	case cut:
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
	ex.finish(after, nil)
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
	host, port, err := http1.SplitAuthority(r.URL.Host, 80)
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
	host, _, err := http1.SplitAuthority(r.Host, port)
	if err != nil || host == "" {
		if err == nil {
			err = errors.New("missing host")
		}
		p.refuseBadRequest(w, ex, host, err)
		return
	}
	p.forward(w, r, ex, host, port)
}
