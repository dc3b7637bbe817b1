package proxy

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/record"
)

// httpHandler is the proxy's side of one HTTP listener served by
// internal/http1: the connection budget at accept, a record for every
// refused head, and each parsed head to CONNECT (handler.go: serveConnect)
// or to a forwarded request (serveRequest).
type httpHandler struct {
	p *Proxy
	// port is the destination port of a Host listener; 0 on the proxy
	// listener (CONNECT and absolute-form).
	port int
}

// serveHTTP serves an HTTP listener with internal/http1's server. HTTP/2
// is not offered: CONNECT over h2 is not supported here, and cleartext h2c
// is not enabled.
func (p *Proxy) serveHTTP(ln net.Listener, port int) error {
	s, err := http1.New(ln, http1.Config{Handler: &httpHandler{p: p, port: port},
		MaxHeaderBytes: p.cfg.MaxHeaderBytes, HeaderTimeout: p.cfg.HeaderTimeout, IdleTimeout: p.cfg.IdleTimeout,
		Capture: probeHeader, Logger: p.log})
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	p.mu.Lock()
	if p.draining.Load() {
		p.mu.Unlock()
		return ErrClosed
	}
	p.servers[s] = struct{}{}
	p.mu.Unlock()
	if err := s.Serve(); err != http1.ErrServerClosed {
		return err
	}
	return ErrClosed
}

// Open takes a MaxConnsPerClient slot for the connection, or refuses it
// (429, counted in the client's summary record).
func (h *httpHandler) Open(c net.Conn) (func(), bool) {
	src := admit.SourceAddr(c.RemoteAddr())
	release := h.p.limit.Acquire(src)
	if release == nil {
		h.p.refuseOverLimit(c, src, record.KindHTTP, true)
		return nil, false
	}
	return release, true
}

// Head serves one parsed head: a CONNECT on the proxy listener becomes a
// tunnel, anything else a forwarded request.
func (h *httpHandler) Head(c *http1.Conn, head *http1.Head) {
	if head.Method == http.MethodConnect && h.port == 0 {
		h.p.serveConnect(c, head)
		return
	}
	h.p.serveRequest(c, head, h.port)
}

// Refused answers (unless the client left) and records a head that did
// not complete or parse, with the method and host it named.
func (h *httpHandler) Refused(c *http1.Conn, he *http1.HeadError) {
	p := h.p
	kind := record.KindHTTP
	if he.Method == http.MethodConnect && h.port == 0 {
		kind = record.KindConnect
	}
	nc := c.NetConn()
	ex := p.newExchange(kind, admit.SourceAddr(nc.RemoteAddr()))
	ex.host = admit.RecordedHost(he.Host)
	ex.rec.HTTP = &record.HTTP{Method: he.Method}
	p.identify(ex)
	ex.rec.Error = audit.RedactText(he.Error())
	if he.Status != 0 {
		rf := &refusal{status: he.Status, reason: string(ex.decision().Reason), err: he.Err}
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(appendRefusal(nil, ex, rf))
	}
	ex.finish("", nil)
}

// probeHeader marks a request made by egressd probe; its value is recorded
// as probe and never forwarded (http1 captures it: Config.Capture).
const probeHeader = "Egressd-Probe"

// maxProbeLen bounds a recorded probe name.
const maxProbeLen = 64

// sanitizeProbe keeps a probe name recordable: at most maxProbeLen bytes of
// letters, digits and . _ - / : (others become _). A clean name is
// returned as it is, without a copy.
func sanitizeProbe(v string) string {
	v = v[:min(len(v), maxProbeLen)]
	clean := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/' || c == ':'
	}
	for i := range len(v) {
		if !clean(v[i]) {
			b := []byte(v)
			for j, c := range b {
				if !clean(c) {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return v
}
