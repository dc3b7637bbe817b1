package proxy

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// net/http answers a malformed request line, an oversized header (431), a
// missing Host and the like itself, before any handler runs, so no handler
// could write their audit record. sniffConn sees those answers on their way
// out: a response that starts while no handler of the connection is
// running can only be net/http's own, and it gets a bad-request record.

type sniffListener struct {
	net.Listener
	p *Proxy
}

// Accept returns the next connection whose client is under
// MaxConnsPerClient; one over it is answered 429 and closed here, so that
// net/http never starts a goroutine for it.
func (l *sniffListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release := l.p.limit.Acquire(addrOf(c.RemoteAddr()))
		if release == nil {
			l.p.refuseOverLimit(c, audit.KindHTTP, true)
			continue
		}
		return &sniffConn{Conn: c, p: l.p, release: release}, nil
	}
}

type sniffConn struct {
	net.Conn
	p *Proxy
	// handlers counts handlers running on the connection.
	handlers atomic.Int32
	// hijacked is set once a handler took the connection over (CONNECT).
	hijacked atomic.Bool
	// release frees the client's connection slot; a hijacked connection
	// hands it to its tunnel, which calls it when it ends.
	release func()
}

func (c *sniffConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

type serverConnKey struct{}

func withServerConn(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*sniffConn); ok {
		return context.WithValue(ctx, serverConnKey{}, sc)
	}
	return ctx
}

func serverConnFrom(ctx context.Context) *sniffConn {
	sc, _ := ctx.Value(serverConnKey{}).(*sniffConn)
	return sc
}

// unwrapConn returns the connection under a sniffConn, so the relay works
// on the *net.TCPConn (splice).
func unwrapConn(c net.Conn) net.Conn {
	if sc, ok := c.(*sniffConn); ok {
		return sc.Conn
	}
	return c
}

func (c *sniffConn) Write(b []byte) (int, error) {
	if c.handlers.Load() == 0 && bytes.HasPrefix(b, []byte("HTTP/1.")) && len(b) >= 12 {
		if status, err := strconv.Atoi(string(b[9:12])); err == nil && status >= 400 {
			c.p.recordRejected(c.Conn.RemoteAddr(), status)
		}
	}
	return c.Conn.Write(b)
}

// recordRejected writes the record of a request net/http refused.
func (p *Proxy) recordRejected(remote net.Addr, status int) {
	ex := p.newExchange(audit.KindHTTP, remote)
	if cl, ok := p.cfg.Identity.Lookup(ex.src); ok {
		ex.client = cl
		ex.rec.Client = audit.ClientOf(ex.src, cl)
	}
	ex.dec = policy.Denied(policy.ReasonBadRequest)
	ex.rec.HTTP = &audit.HTTP{Status: status}
	ex.rec.Error = "request refused by the HTTP parser: " + strconv.Itoa(status)
	ex.finish(nil)
}
