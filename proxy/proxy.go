package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// dialFunc dials one checked address. It is a field so that tests can prove
// that a refused address is never dialled.
type dialFunc func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

// Proxy serves the proxy and transparent listeners. Create it with New.
type Proxy struct {
	cfg   Config
	log   *slog.Logger
	m     *metrics.Metrics
	mc    *metricChildren
	dial  dialFunc
	adm   *admit.Pipeline
	fwd   *forwarder
	limit *limit.Conns

	mu sync.Mutex
	// draining is set once, under mu, when Shutdown begins; read without
	// mu by the accept loops (Draining), under mu where a registration
	// must not race it (track, serveHTTP, ServeSNI).
	draining  atomic.Bool
	servers   map[*http1.Server]struct{}
	listeners map[net.Listener]struct{}
	tunnels   map[*tunnel]struct{}
	// requests are the plain HTTP requests being forwarded, for
	// revocation (revoke.go); created on first use.
	requests map[*watchedRequest]struct{}
	// Revalidate's state: when it was last called, whether a pass is
	// asked for, whether its goroutine runs.
	revalAt      atomic.Pointer[time.Time]
	revalPending atomic.Bool
	revalRunning atomic.Bool
	// open counts tracked tunnels and transparent connections; Shutdown
	// waits for it. Add happens only under mu while not draining, so Wait
	// never races a first Add.
	open sync.WaitGroup
	// cutCtx ends at the drain deadline; every request's context (and so
	// its lookup, dial and upstream request) is cancelled with it.
	cutCtx      context.Context
	cutHandlers context.CancelFunc
	// overLimit gathers connections refused over MaxConnsPerClient into
	// one summary record per client, kind and second.
	overLimit *limit.Summary
}

// New returns a proxy for cfg after validating it.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Proxy{
		cfg:       cfg,
		log:       cfg.Logger,
		m:         cfg.Metrics,
		mc:        newMetricChildren(cfg.Metrics),
		servers:   map[*http1.Server]struct{}{},
		listeners: map[net.Listener]struct{}{},
		tunnels:   map[*tunnel]struct{}{},
		limit:     limit.NewConns(cfg.MaxConnsPerClient),
	}
	adm, err := admit.New(cfg.admitConfig())
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.adm = adm
	p.cutCtx, p.cutHandlers = context.WithCancel(context.Background())
	// Keep-alive on upstream connections keeps the mapping of a NAT
	// between egressd and the origin (a cloud NAT gateway drops idle
	// flows after 4 to 6 minutes) while a tunnel idles, probing after 15s
	// as Go's default does; the probe interval and count stay the
	// kernel's: two socket options per dial instead of four.
	d := &net.Dialer{Timeout: cfg.DialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: -1, Count: -1}}
	// Not Dialer.DialTCP: its local address is never nil, so it binds
	// every socket to port 0 before the connect, a system call more and an
	// ephemeral port taken for every destination instead of per
	// destination (bind(2) cannot share one port across 4-tuples).
	p.dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr.String())
	}
	p.fwd = newForwarder(p)
	p.overLimit = limit.NewSummary(limit.SummaryConfig{Emit: p.emitOverLimit})
	return p, nil
}

// ServeProxy serves HTTP CONNECT and absolute-form HTTP requests on ln until
// Shutdown, then returns ErrClosed.
func (p *Proxy) ServeProxy(ln net.Listener) error {
	return p.serveHTTP(ln, 0)
}

// ServeTransparentHTTP serves plain HTTP for clients without proxy support:
// each request is decided on its Host header and the destination port that
// the listener stands for (port, normally 80). It returns ErrClosed after
// Shutdown.
func (p *Proxy) ServeTransparentHTTP(ln net.Listener, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("proxy: transparent HTTP port %d: want 1-65535", port)
	}
	return p.serveHTTP(ln, port)
}

// ServeSNI serves transparent TLS on ln: the destination is the ClientHello's
// SNI and port, the port that the listener stands for (normally 443). It
// returns ErrClosed after Shutdown.
func (p *Proxy) ServeSNI(ln net.Listener, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("proxy: SNI port %d: want 1-65535", port)
	}
	p.mu.Lock()
	if p.draining.Load() {
		p.mu.Unlock()
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	for {
		c, err := http1.Accept(ln, p.Draining)
		if errors.Is(err, http1.ErrServerClosed) {
			return ErrClosed
		}
		if err != nil {
			return fmt.Errorf("proxy: SNI listener: %w", err)
		}
		src := admit.SourceAddr(c.RemoteAddr())
		release := p.limit.Acquire(src)
		if release == nil {
			p.refuseOverLimit(c, src, record.KindSNI, false)
			continue
		}
		t := newTunnel(p, c, p.newExchange(record.KindSNI, src))
		t.release = release
		if !p.track(t) {
			c.Close()
			release()
			return ErrClosed
		}
		go p.serveSNIConn(t, port)
	}
}

// Draining reports whether Shutdown has begun.
func (p *Proxy) Draining() bool { return p.draining.Load() }

// Shutdown stops accepting, lets open requests and tunnels finish until ctx
// ends, then cuts what is left. Every drained or cut tunnel still gets its
// audit record before Shutdown returns, and so does every plain HTTP
// request. It returns ctx.Err() when it had to cut.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.draining.Store(true)
	servers := make([]*http1.Server, 0, len(p.servers))
	for s := range p.servers {
		servers = append(servers, s)
	}
	for ln := range p.listeners {
		ln.Close()
	}
	p.mu.Unlock()

	var wg sync.WaitGroup
	var cutServer atomic.Bool
	for _, s := range servers {
		wg.Go(func() {
			// Shutdown closes the listener and idle keep-alive connections
			// and waits for requests in progress; at the deadline Close cuts
			// them and waits for their records. CONNECT tunnels are tracked
			// by p, not by s.
			if err := s.Shutdown(ctx); err != nil {
				cutServer.Store(true)
				// A request waiting on its origin sees no closed
				// connection: cancel the upstream requests too.
				p.cutHandlers()
				s.Close()
			}
		})
	}
	done := make(chan struct{})
	go func() { p.open.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		p.mu.Lock()
		for t := range p.tunnels {
			t.cut()
		}
		p.mu.Unlock()
		<-done // closing both ends unblocks every relay; records follow
	}
	wg.Wait() // every plain HTTP request has ended and written its record
	p.overLimit.Close()
	if err == nil && cutServer.Load() {
		err = ctx.Err()
	}
	return err
}

// Every connection, and each direction of every tunnel, runs on a goroutine
// of its own (plain go). internal/gopool's parked goroutines (two pools,
// for connections and for relays) did not win beyond the round-to-round
// spread on the peer bench (the figures: bench/peer/gopool-ab.md): the
// runtime sizes new stacks from the measured average (Go 1.19+).

// track registers a tunnel; false when draining.
func (p *Proxy) track(t *tunnel) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining.Load() {
		return false
	}
	p.tunnels[t] = struct{}{}
	p.open.Add(1)
	return true
}

func (p *Proxy) untrack(t *tunnel) {
	p.mu.Lock()
	delete(p.tunnels, t)
	p.mu.Unlock()
	if t.release != nil {
		t.release() // the client connection is closed by now
	}
	p.open.Done()
}
