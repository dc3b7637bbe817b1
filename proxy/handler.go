package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// connectEstablished is the answer to an admitted CONNECT (RFC 9110 §9.3.6).
var connectEstablished = []byte("HTTP/1.1 200 Connection established\r\n\r\n")

// handleProxy serves the proxy listener: CONNECT and absolute-form HTTP.
func (p *Proxy) handleProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.handleConnect(w, r)
		return
	}
	ex := p.newExchange(audit.KindHTTP, remoteAddr(r))
	defer p.finishRequest(w, r, ex)
	ex.rec.HTTP = &audit.HTTP{Method: r.Method, Path: audit.RedactPath(r.URL)}
	switch {
	case !r.URL.IsAbs():
		ex.host = truncate(r.Host, maxHostLen)
		p.refuseBadRequest(w, ex, errors.New("not a proxy request: absolute-form or CONNECT required"))
		return
	case r.URL.Scheme != "http":
		// https:// in absolute form would make egressd the TLS client and
		// hide the pod's handshake; clients must use CONNECT (curl, Go and
		// Python do for https:// through HTTPS_PROXY).
		ex.host = truncate(r.URL.Hostname(), maxHostLen)
		p.refuseBadRequest(w, ex, fmt.Errorf("scheme %q in absolute-form: use CONNECT", r.URL.Scheme))
		return
	}
	host, port, err := requestHost(r.URL.Host, 80)
	if err != nil {
		ex.host = truncate(host, maxHostLen)
		p.refuseBadRequest(w, ex, err)
		return
	}
	p.forward(w, r, ex, host, port)
}

// handleTransparentHTTP serves the transparent HTTP listener: the
// destination is the Host header's name and the listener's port.
func (p *Proxy) handleTransparentHTTP(w http.ResponseWriter, r *http.Request, port int) {
	ex := p.newExchange(audit.KindHTTP, remoteAddr(r))
	defer p.finishRequest(w, r, ex)
	ex.rec.HTTP = &audit.HTTP{Method: r.Method, Path: audit.RedactPath(r.URL)}
	if r.Method == http.MethodConnect || r.URL.IsAbs() && r.URL.Scheme != "http" {
		p.refuseBadRequest(w, ex, errors.New("not a plain HTTP request"))
		return
	}
	host, _, err := requestHost(r.Host, port)
	if err != nil || host == "" {
		if err == nil {
			err = errors.New("missing host")
		}
		ex.host = truncate(host, maxHostLen)
		p.refuseBadRequest(w, ex, err)
		return
	}
	p.forward(w, r, ex, host, port)
}

// finishRequest writes the record of a plain HTTP request; a panic is
// logged and recorded, and net/http's abort panic is passed on so that the
// connection is dropped.
func (p *Proxy) finishRequest(w http.ResponseWriter, r *http.Request, ex *exchange) {
	v := recover()
	if p.cutCtx.Err() != nil && (v == http.ErrAbortHandler || r.Context().Err() != nil) {
		// Still running at the drain deadline: whatever failed (copy,
		// cancelled request, closed connection) followed from the cut.
		ex.rec.Error = ErrCut.Error()
	}
	if v != nil {
		if v == http.ErrAbortHandler {
			if ex.rec.Error == "" {
				ex.rec.Error = "aborted while copying the response"
			}
		} else {
			p.log.Error("proxy: panic in handler", "panic", v, "kind", ex.rec.Kind)
			ex.rec.Error = fmt.Sprintf("internal error: %v", v)
		}
	}
	if r.Context().Err() != nil && ex.rec.Error == "" {
		ex.rec.Error = "client aborted"
	}
	ex.finish(nil)
	if v != nil {
		panic(http.ErrAbortHandler) // net/http closes the connection quietly
	}
}

// handleConnect decides and dials a CONNECT, answers 200, hijacks the
// connection and starts the tunnel; the handler returns while the tunnel
// runs in two goroutines of its own.
func (p *Proxy) handleConnect(w http.ResponseWriter, r *http.Request) {
	ex := p.newExchange(audit.KindConnect, remoteAddr(r))
	ex.rec.HTTP = &audit.HTTP{Method: http.MethodConnect}
	started := false
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("proxy: panic in CONNECT", "panic", v)
			ex.rec.Error = fmt.Sprintf("internal error: %v", v)
			started = false
		}
		if !started {
			ex.finish(nil)
		}
	}()
	host, port, err := requestHost(r.Host, 0)
	if err == nil && port == 0 {
		err = errors.New("CONNECT target needs a port")
	}
	if err != nil {
		ex.host = truncate(host, maxHostLen)
		ex.port = port
		p.refuseBadRequest(w, ex, err)
		return
	}
	if rf := p.admit(ex, host, port); rf != nil {
		writeRefusal(w, ex, rf)
		return
	}
	up, rf := p.dialGuarded(r.Context(), ex)
	if rf != nil {
		writeRefusal(w, ex, rf)
		return
	}
	t := newTunnel(p, nil)
	t.ex = ex
	t.upstream = up
	if !p.track(t) {
		up.Close()
		p.fail(ex, http.StatusServiceUnavailable, policy.ReasonDialFailed, ErrClosed)
		writeRefusal(w, ex, &refusal{status: http.StatusServiceUnavailable, reason: policy.ReasonDialFailed, err: ErrClosed})
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		ex.rec.Error = audit.RedactText(err.Error())
		p.untrack(t)
		return
	}
	client := unwrapConn(c)
	// Under t.mu: Shutdown may cut the tunnel (closeBoth) at any time now.
	t.mu.Lock()
	if sc, ok := c.(*sniffConn); ok {
		sc.hijacked.Store(true)
		t.release = sc.release // net/http no longer closes sc: the tunnel does
	}
	t.client = client
	cut := t.closed
	t.mu.Unlock()
	if cut {
		// Cut at the drain deadline before it had a client: no 200, no
		// relay; end closes the client and the record keeps ErrCut.
		t.pending.Store(1)
		started = true
		t.guard(func() {})
		return
	}
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		// A client that sent its ClientHello with the CONNECT (no wait for
		// the 200) left it in net/http's reader, which is ours after the
		// hijack: peekHello copies it out, no need to copy here.
		pre, _ = brw.Reader.Peek(n)
	}
	if _, err := client.Write(connectEstablished); err != nil {
		t.fail(err)
		t.pending.Store(1)
		t.active = false
		started = true
		t.guard(func() {})
		return
	}
	started = true
	t.start(pre, nil, ex.host, false)
}

// remoteAddr returns the request's peer as a net.Addr.
func remoteAddr(r *http.Request) net.Addr {
	if c := serverConnFrom(r.Context()); c != nil {
		return c.RemoteAddr()
	}
	ap, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return nil
	}
	return ap
}
