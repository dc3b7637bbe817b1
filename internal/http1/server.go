package http1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handler is what a Server asks of its user, one method per event of a
// connection. Its methods run on the connection's goroutine.
type Handler interface {
	// Open is called for each accepted connection before its first read.
	// It returns the function that frees what the connection holds (its
	// client's connection slot), called once when the connection ends
	// unless it was hijacked; ok false means the handler refused c and
	// has closed it (or will).
	Open(c net.Conn) (release func(), ok bool)
	// Head serves one request head that parsed. The handler either takes
	// the connection over (Conn.Hijack: a CONNECT), serves the request as
	// a ServedRequest (Conn.Begin, then ServedRequest.Finish), or answers on
	// Conn.NetConn itself; in the last case the connection closes after.
	Head(c *Conn, h *Head)
	// Refused is called for every head that began and was refused or did
	// not complete (at the header timeout, or the client left): the
	// handler answers e.Status (unless 0) and records it. The connection
	// closes after.
	Refused(c *Conn, e *HeadError)
}

// Config configures a Server.
type Config struct {
	// Handler serves the connections; required.
	Handler Handler
	// MaxHeaderBytes bounds a request head, request line included (431
	// over it), and a chunked body's trailer section; zero means 1 MiB.
	MaxHeaderBytes int
	// HeaderTimeout bounds a request head from the accept (the first) or
	// from its first byte (the next ones): 408 after it; zero means 10s.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request of a keep-alive
	// connection; zero means 90s.
	IdleTimeout time.Duration
	// Capture names a field addressed to this server (ReadHead); ""
	// captures none.
	Capture string
	// Logger receives panics of a connection's goroutine; nil discards
	// them.
	Logger *slog.Logger
}

// Server serves HTTP/1 on one listener: an accept loop and one goroutine
// per connection. Shutdown and Close behave as net/http's do, except that
// Close also waits for the connections' goroutines, so that every
// request's handler has returned when it does.
type Server struct {
	cfg Config
	ln  net.Listener
	// shutting is set by Shutdown and Close: the connections close after
	// their request, and responses say Connection: close.
	shutting atomic.Bool

	mu    sync.Mutex
	conns map[*Conn]struct{}
	// wg counts the connections' goroutines; Add only under mu while not
	// shutting, so Wait never races a first Add.
	wg sync.WaitGroup
}

// New returns a server for ln; Serve serves it.
func New(ln net.Listener, cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("http1: Config.Handler is required")
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 1 << 20
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: cfg, ln: ln, conns: map[*Conn]struct{}{}}, nil
}

// Serve accepts until the listener is closed; ErrServerClosed after
// Shutdown or Close.
func (s *Server) Serve() error {
	for {
		nc, err := Accept(s.ln, s.shutting.Load)
		if err != nil {
			return err
		}
		release, ok := s.cfg.Handler.Open(nc)
		if !ok {
			continue
		}
		c := &Conn{s: s, c: nc, release: release}
		if !s.add(c) {
			nc.Close()
			if release != nil {
				release()
			}
			return ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) add(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

// forget removes a connection that ended or was hijacked.
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// setIdle marks a connection idle (waiting for its next request) or busy;
// false when the server is shutting down and the connection must end.
func (s *Server) setIdle(c *Conn, idle bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.idle = idle
	return !s.shutting.Load()
}

// Shutdown closes the listener and the idle connections, then waits for the
// others to finish their request, until ctx ends. Hijacked connections are
// the handler's.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting.Store(true)
	s.ln.Close()
	for c := range s.conns {
		if c.idle {
			c.c.Close()
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
// in progress ends (its handler sees the closed connection, and the user
// cancels what its context governs) and its handler returns.
func (s *Server) Close() {
	s.mu.Lock()
	s.shutting.Store(true)
	s.ln.Close()
	for c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Accept returns ln's next connection. While the process is out of
// descriptors (or an accept times out) it backs off as net/http does, from
// 5 ms doubling up to a second, instead of spinning. An error after
// stopped reports true is the stop's: ErrServerClosed. Every listener of
// the proxy accepts through it (this server's, the SNI listener's).
func Accept(ln net.Listener, stopped func() bool) (net.Conn, error) {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err == nil {
			return nc, nil
		}
		if stopped() {
			return nil, ErrServerClosed
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		return nil, fmt.Errorf("http1: accept on %s: %w", ln.Addr(), err)
	}
}
