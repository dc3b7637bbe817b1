package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/record"
)

// httpServer serves one proxy or Host listener: an accept loop and one
// goroutine per connection that reads request heads with readHead. It
// replaces net/http's Server there (see head.go for why); Shutdown and
// Close behave as net/http's do, except that Close also waits for the
// connections' goroutines, so that every record is written when it returns.
type httpServer struct {
	p  *Proxy
	ln net.Listener
	// port is the destination port of a Host listener; 0 on the proxy
	// listener (CONNECT and absolute-form).
	port int

	mu       sync.Mutex
	conns    map[*httpConn]struct{}
	shutting bool
	// wg counts the connections' goroutines; Add only under mu while not
	// shutting, so Wait never races a first Add.
	wg sync.WaitGroup
}

// httpConn is one client connection of an httpServer until it ends or a
// CONNECT hands it to a tunnel.
type httpConn struct {
	s       *httpServer
	c       net.Conn
	src     netip.Addr
	br      *bufio.Reader
	release func() // the client's MaxConnsPerClient slot
	idle    bool   // under s.mu: between requests

	// wmu orders the interim 100 Continue (written from the Transport's
	// body reader) before the response; started is set under it once the
	// response began.
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
// that does not fit is still read (readHead joins the pieces).
const readerBufSize = 4 << 10

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerBufSize) }}

// aLongTimeAgo is a deadline in the past: it unblocks a pending read now.
var aLongTimeAgo = time.Unix(1, 0)

func (p *Proxy) newHTTPServer(ln net.Listener, port int) (*httpServer, error) {
	s := &httpServer{p: p, ln: ln, port: port, conns: map[*httpConn]struct{}{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		return nil, ErrClosed
	}
	p.servers[s] = struct{}{}
	return s, nil
}

// serve accepts until the listener is closed.
func (s *httpServer) serve() error {
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isShutting() {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors: back off as net/http does instead of
				// spinning, up to a second.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("proxy: accept on %s: %w", s.ln.Addr(), err)
		}
		backoff = 0
		src := addrOf(c.RemoteAddr())
		release := s.p.limit.Acquire(src)
		if release == nil {
			s.p.refuseOverLimit(c, record.KindHTTP, true)
			continue
		}
		hc := &httpConn{s: s, c: c, src: src, release: release}
		if !s.add(hc) {
			c.Close()
			release()
			return ErrClosed
		}
		go hc.serve()
	}
}

func (s *httpServer) isShutting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutting
}

func (s *httpServer) add(hc *httpConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting {
		return false
	}
	s.conns[hc] = struct{}{}
	s.wg.Add(1)
	return true
}

// forget removes a connection that ended or became a tunnel.
func (s *httpServer) forget(hc *httpConn) {
	s.mu.Lock()
	delete(s.conns, hc)
	s.mu.Unlock()
	s.wg.Done()
}

// setIdle marks a connection idle (waiting for its next request) or busy;
// false when the server is shutting down and the connection must end.
func (s *httpServer) setIdle(hc *httpConn, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	hc.idle = idle
	return !s.shutting
}

// Shutdown closes the listener and the idle connections, then waits for the
// others to finish their request, until ctx ends.
func (s *httpServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting = true
	s.ln.Close()
	for hc := range s.conns {
		if hc.idle {
			hc.c.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every connection and waits for their goroutines: a request
// in progress ends (its context is cut by the Proxy) and writes its record.
func (s *httpServer) Close() {
	s.mu.Lock()
	s.shutting = true
	s.ln.Close()
	for hc := range s.conns {
		hc.c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// serve reads and serves the connection's requests in order until it
// closes, a response says close, or a CONNECT takes it over.
func (hc *httpConn) serve() {
	p := hc.s.p
	hc.br = readerPool.Get().(*bufio.Reader)
	hc.br.Reset(hc.c)
	hijacked := false
	keepReader := true
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("proxy: panic serving a connection", "panic", v)
			keepReader = false
		}
		if !hijacked {
			hc.c.Close()
			hc.release()
			hc.s.forget(hc)
		}
		if keepReader {
			hc.br.Reset(nil)
			readerPool.Put(hc.br)
		}
	}()
	// The first head must be complete HeaderTimeout after the accept; one
	// deadline serves the whole head.
	if err := hc.c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout)); err != nil {
		return
	}
	for first := true; ; first = false {
		if !first {
			// Between requests: IdleTimeout for a first byte, then
			// HeaderTimeout for the rest of the head.
			if !hc.s.setIdle(hc, true) {
				return
			}
			if hc.br.Buffered() == 0 {
				if err := hc.c.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout)); err != nil {
					return
				}
			}
			if _, err := hc.br.Peek(1); err != nil {
				return // closed or idle between requests: no request, no record
			}
			// A request has begun: served even if Shutdown began meanwhile
			// (the connection closes after it).
			hc.s.setIdle(hc, false)
			if err := hc.c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout)); err != nil {
				return
			}
		}
		head, herr := readHead(hc.br, p.cfg.MaxHeaderBytes)
		if herr != nil {
			p.refuseHead(hc, herr)
			return
		}
		if head.method == http.MethodConnect && hc.s.port == 0 {
			var ok bool
			ok, hijacked = p.serveConnect(hc, head)
			keepReader = ok
			return
		}
		keep, readerFree := p.serveRequest(hc, head)
		if !readerFree {
			// A body read may still be in flight in the Transport's
			// goroutine: the reader is not reused.
			keepReader = false
			return
		}
		if !keep || p.Draining() {
			return
		}
	}
}

// refuseHead answers (unless the client left) and records a head that did
// not complete or parse. A connection that sent nothing gets no record.
func (p *Proxy) refuseHead(hc *httpConn, he *headError) {
	if he.n == 0 {
		return
	}
	kind := record.KindHTTP
	if he.method == http.MethodConnect && hc.s.port == 0 {
		kind = record.KindConnect
	}
	ex := p.newExchangeFrom(kind, hc.src)
	ex.host = he.host
	ex.rec.HTTP = &record.HTTP{Method: he.method}
	p.identify(ex)
	ex.rec.Error = audit.RedactText(he.Error())
	if he.status != 0 {
		rf := &refusal{status: he.status, reason: string(ex.decision().Reason), err: he.err}
		_ = hc.c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = hc.c.Write(appendRefusal(nil, ex, rf))
	}
	ex.finish(nil)
}
