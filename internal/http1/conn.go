package http1

import (
	"bufio"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one client connection of a Server until it ends or a handler
// hijacks it.
type Conn struct {
	s       *Server
	c       net.Conn
	br      *bufio.Reader
	release func() // Handler.Open's
	idle    bool   // under s.mu: between requests

	// Set by the handler's calls on the connection's goroutine.
	hijacked   bool
	x          *ServedRequest // begun and not finished
	body       *requestBody   // x's body; nil when it has none
	stopped    bool           // x's client watch has ended
	gone       bool           // the client left while x ran
	keep       bool           // the last exchange lets the connection go on
	readerBusy bool           // a body read may still be in flight on br

	// wmu orders the interim 100 Continue (written from the body reader,
	// maybe another goroutine) before the response; started is set under
	// it once the response began.
	wmu     sync.Mutex
	started bool

	// The background read of a request in progress (see watchClient).
	bgMu      sync.Mutex
	bgDone    chan struct{}
	bgEnded   bool // the handler ended: start no background read
	bgAbort   atomic.Bool
	bgGone    atomic.Bool // the client closed while its request ran
	reqCancel context.CancelFunc
}

// readerBufSize is the read buffer of a client connection: a request head
// that does not fit is still read (ReadHead joins the pieces).
const readerBufSize = 4 << 10

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerBufSize) }}

// aLongTimeAgo is a deadline in the past: it unblocks a pending read now.
var aLongTimeAgo = time.Unix(1, 0)

// NetConn is the client connection, for answers the handler writes itself
// (a refusal, CONNECT's 200) and for its address.
func (c *Conn) NetConn() net.Conn { return c.c }

// Hijack takes the connection over: the server forgets it (Shutdown no
// longer waits for it), its read buffer goes back to the pool, and the
// caller gets the connection, Handler.Open's release function (now the
// caller's to call) and a copy of the bytes read past the head (a client
// that sent its ClientHello with the CONNECT). Only from Handler.Head,
// before Begin.
func (c *Conn) Hijack() (nc net.Conn, release func(), buffered []byte) {
	c.hijacked = true
	c.s.forget(c)
	if n := c.br.Buffered(); n > 0 {
		b, _ := c.br.Peek(n)
		buffered = append([]byte(nil), b...)
	}
	// A hijacked connection (an idle tunnel) holds no read buffer.
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.br = nil
	return c.c, c.release, buffered
}

// serve reads and serves the connection's requests in order until it
// closes, a response says close, or a handler hijacks it.
func (c *Conn) serve() {
	s := c.s
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(c.c)
	keepReader := true
	defer func() {
		if v := recover(); v != nil {
			s.cfg.Logger.Error("http1: panic serving a connection", "panic", v)
			keepReader = false
		}
		if c.hijacked {
			return
		}
		c.c.Close()
		if c.release != nil {
			c.release()
		}
		s.forget(c)
		if keepReader {
			c.br.Reset(nil)
			readerPool.Put(c.br)
		}
	}()
	// The first head must be complete HeaderTimeout after the accept; one
	// deadline serves the whole head.
	if err := c.c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout)); err != nil {
		return
	}
	for first := true; ; first = false {
		if !first {
			// Between requests: IdleTimeout for a first byte, then
			// HeaderTimeout for the rest of the head.
			if !s.setIdle(c, true) {
				return
			}
			if c.br.Buffered() == 0 {
				if err := c.c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout)); err != nil {
					return
				}
			}
			if _, err := c.br.Peek(1); err != nil {
				return // closed or idle between requests: no request, no record
			}
			// A request has begun: served even if Shutdown began meanwhile
			// (the connection closes after it).
			s.setIdle(c, false)
			if err := c.c.SetReadDeadline(time.Now().Add(s.cfg.HeaderTimeout)); err != nil {
				return
			}
		}
		h, he := ReadHead(c.br, s.cfg.MaxHeaderBytes, s.cfg.Capture)
		if he != nil {
			if he.N > 0 { // a connection that sent nothing made no request
				s.cfg.Handler.Refused(c, he)
			}
			return
		}
		c.keep = false
		s.cfg.Handler.Head(c, h)
		if c.hijacked {
			return
		}
		if c.x != nil { // begun and never finished: cut it
			c.x.Finish(true)
		}
		if c.readerBusy {
			// A body read may still be in flight in another goroutine
			// (the Transport's): the reader is not reused.
			keepReader = false
			return
		}
		if !c.keep || s.shutting.Load() {
			return
		}
	}
}
