package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// Config configures the DNS server (--dns-addr). The Resolver (cache and
// upstreams) is built apart and shared with the proxy.
type Config struct {
	// Addr is where Serve listens, UDP and TCP. Zero means ":5353".
	Addr string
	// Resolver answers allowed names; required.
	Resolver *resolver.Resolver
	// Inputs are the admission's: Policy and Identity required, Mode
	// enforce or audit (zero: enforce), AuditAvailable (--audit-failure
	// closed: while it returns false, queries are answered REFUSED with
	// reason audit-unavailable and still recorded; nil: always).
	admit.Inputs
	// Names place a question's name: ClusterDomain (zero:
	// "cluster.local"), ClusterCIDRs (the PTR names that go to ClusterDNS;
	// the CLI passes its --private-cidr ranges), SearchDomains (the
	// node's, besides the cluster's own; the CLI passes
	// resolver.SearchFromResolvConf). See doc.go.
	admit.Names
	// Audit receives one record per query; required.
	Audit *audit.Logger
	// Metrics is required.
	Metrics *metrics.Metrics
	// Logger receives failures at debug level. Nil means discard.
	Logger *slog.Logger
	// ClusterDNS are the cluster's DNS servers (kube-dns), "IP[:port]",
	// asked for names under ClusterDomain and the PTR names of addresses in
	// ClusterCIDRs. Empty means such names are answered NXDOMAIN (no
	// cluster: a laptop run).
	ClusterDNS []string
	// AdvertiseIP, when valid, turns on transparent mode: an allowed name
	// that exists upstream is answered (A) with this address, so
	// proxy-unaware clients land on the transparent listeners. Zero means
	// not transparent.
	AdvertiseIP netip.Addr
	// AdvertiseIP6 is the AAAA answer in transparent mode. Zero means
	// allowed AAAA queries get an empty NOERROR answer.
	AdvertiseIP6 netip.Addr
	// AdvertiseTTL caps the TTL of transparent answers, so that a policy
	// change reaches clients soon. Zero means 30s.
	AdvertiseTTL time.Duration
	// UDPSize is the largest UDP answer we send to a client that
	// advertises EDNS0; without EDNS0 it is 512 (RFC 1035 §4.2.1). Zero
	// means 1232.
	UDPSize uint16
	// QueryTimeout bounds the handling of a query that asks the cluster
	// DNS or looks a name up for transparent mode. A cache miss is bounded
	// by the Resolver instead (two tries per upstream, its Timeout each).
	// Zero means 5s.
	QueryTimeout time.Duration
	// MaxConnsPerClient bounds the TCP connections one source IP holds
	// open (the proxy's --max-conns-per-client): one over it is closed at
	// once and counted in a summary record (reason rate-limited).
	// Zero means 1024; negative means no limit.
	MaxConnsPerClient int
	// QueryRate is the queries per second one source IP may send, UDP and
	// TCP together (--dns-rate); a query over it is answered REFUSED,
	// never larger than the query, and counted in one summary record per
	// client and second (reason rate-limited, count). Zero means
	// DefaultQueryRate; negative means no limit.
	QueryRate float64
	// QueryBurst is how many queries above QueryRate one source IP may
	// send at once (--dns-burst). Zero means twice QueryRate.
	QueryBurst int
	// Now is the clock of the rate limit. Nil means time.Now.
	Now func() time.Time
}

// Defaults applied by New.
const (
	DefaultAddr              = ":5353"
	DefaultMaxConnsPerClient = 1024
	// DefaultQueryRate is generous for a pod: a busy one (an LLM client
	// opening connections to a handful of hosts, a JVM without a DNS
	// cache) asks tens of names a second; a stub resolver's search list
	// multiplies that by six at most.
	DefaultQueryRate    = 1000
	DefaultQueryTimeout = 5 * time.Second
	DefaultAdvertiseTTL = 30 * time.Second
)

// Validate reports configuration errors a person can act on.
func (c Config) Validate() error {
	var errs []error
	if c.Resolver == nil {
		errs = append(errs, errors.New("dnsserver: Config.Resolver is required"))
	}
	if c.Policy == nil {
		errs = append(errs, errors.New("dnsserver: Config.Policy is required"))
	}
	if c.Identity == nil {
		errs = append(errs, errors.New("dnsserver: Config.Identity is required"))
	}
	if c.Audit == nil {
		errs = append(errs, errors.New("dnsserver: Config.Audit is required"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("dnsserver: Config.Metrics is required"))
	}
	if c.QueryBurst < 0 {
		errs = append(errs, errors.New("dnsserver: negative query burst"))
	}
	switch c.Mode {
	case "", policy.ModeEnforce, policy.ModeAudit:
	default:
		errs = append(errs, fmt.Errorf("dnsserver: mode %q: want enforce or audit", c.Mode))
	}
	for _, p := range c.ClusterCIDRs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("dnsserver: cluster CIDR %q is not valid", p))
		}
	}
	if c.AdvertiseIP.IsValid() && !c.AdvertiseIP.Unmap().Is4() {
		errs = append(errs, fmt.Errorf("dnsserver: advertise IP %s is not IPv4 (use AdvertiseIP6)", c.AdvertiseIP))
	}
	if c.AdvertiseIP6.IsValid() && !c.AdvertiseIP6.Is6() {
		errs = append(errs, fmt.Errorf("dnsserver: advertise IPv6 %s is not IPv6", c.AdvertiseIP6))
	}
	return errors.Join(errs...)
}

// Server is the DNS server pods use. It answers only what the asking pod
// may reach; see doc.go for the flow.
type Server struct {
	cfg     Config
	admit   *admit.Pipeline  // identify, audit availability, the name
	cluster *resolver.Client // nil without ClusterDNS
	// served is the cache as pods are served from it: servedOf once per
	// cache entry and second (resolver.View).
	served *resolver.View[*served]

	counters *metrics.Children[counterKey, counters] // record.go
	conns    *limit.Conns                            // TCP connections per client
	rate     *limit.Rate                             // queries per client
	refused  *limit.Summary                          // refusals over a limit

	mu      sync.Mutex
	closed  bool
	running []*running
}

// running is one serving listener: shutdown waits for started (or done)
// before it stops it.
type running struct {
	net      string
	shutdown func(context.Context) error
	started  chan struct{}
	done     chan struct{}
}

// New returns a Server for cfg after applying the defaults.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Mode == "" {
		cfg.Mode = policy.ModeEnforce
	}
	if cfg.AdvertiseTTL == 0 {
		cfg.AdvertiseTTL = DefaultAdvertiseTTL
	}
	if cfg.UDPSize == 0 {
		cfg.UDPSize = resolver.DefaultUDPSize
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	if cfg.QueryRate == 0 {
		cfg.QueryRate = DefaultQueryRate
	}
	if cfg.QueryBurst == 0 {
		cfg.QueryBurst = int(max(2*cfg.QueryRate, 1))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.AdvertiseIP = cfg.AdvertiseIP.Unmap()
	s := &Server{cfg: cfg, counters: newCounters(cfg.Metrics), conns: limit.NewConns(cfg.MaxConnsPerClient),
		served: resolver.NewView(cfg.Resolver, servedOf)}
	if cfg.QueryRate > 0 {
		s.rate = limit.NewRate(cfg.QueryRate, cfg.QueryBurst, cfg.Now)
	}
	s.refused = limit.NewSummary(limit.SummaryConfig{Emit: s.recordRefusals})
	// A question is decided by name alone: the guard classifies no
	// address of it (the answer filter does, answer.go), but admit.Config
	// requires one.
	pipe, err := admit.New(admit.Config{Inputs: cfg.Inputs, Names: cfg.Names, Guard: policy.NewGuard(policy.GuardConfig{})})
	if err != nil {
		return nil, err // Validate checked what admit.Config requires
	}
	s.admit = pipe
	if len(cfg.ClusterDNS) > 0 {
		c, err := resolver.NewClient(resolver.ClientConfig{Servers: cfg.ClusterDNS, Metrics: cfg.Metrics, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("dnsserver: cluster DNS: %w", err)
		}
		s.cluster = c
	}
	return s, nil
}

// Serve listens on Addr over UDP and TCP and serves until ctx ends or
// Shutdown is called.
func (s *Server) Serve(ctx context.Context) error {
	pc, err := net.ListenPacket("udp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("dnsserver: listen udp %s: %w", s.cfg.Addr, err)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dnsserver: listen tcp %s: %w", s.cfg.Addr, err)
	}
	errc := make(chan error, 2)
	go func() { errc <- s.ServeUDP(pc) }()
	go func() { errc <- s.ServeTCP(ln) }()
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil && first == nil {
		first = err
	}
	if errors.Is(first, ErrServerClosed) {
		first = nil
	}
	return first
}

// ServeUDP serves queries arriving on pc until Shutdown. pc is closed then.
// A fixed set of goroutines reads pc (udp.go).
func (s *Server) ServeUDP(pc net.PacketConn) error {
	u := newUDPServer(s, pc)
	return s.serve("udp", u.started, u.serve, u.shutdown)
}

// ServeTCP serves queries arriving on ln until Shutdown. ln is closed then.
// A source IP holding MaxConnsPerClient connections has its next one
// closed at accept (limit.go).
func (s *Server) ServeTCP(ln net.Listener) error {
	srv := &dns.Server{Listener: &limitListener{Listener: ln, s: s}, Net: "tcp", Handler: s, MsgAcceptFunc: acceptQuery}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	return s.serve("tcp", started, srv.ActivateAndServe, srv.ShutdownContext)
}

func (s *Server) serve(network string, started chan struct{}, run func() error, shutdown func(context.Context) error) error {
	r := &running{net: network, shutdown: shutdown, started: started, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.running = append(s.running, r)
	s.mu.Unlock()
	err := run()
	close(r.done)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServerClosed
	}
	if err != nil {
		return fmt.Errorf("dnsserver: serve %s: %w", network, err)
	}
	return nil
}

// Shutdown stops every listener and waits for queries in progress, up to
// ctx, then writes the summary records of the refusals still pending.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	rs := s.running
	s.running = nil
	s.mu.Unlock()
	defer s.refused.Close()
	var errs []error
	for _, r := range rs {
		select {
		case <-r.started:
		case <-r.done:
			continue
		case <-ctx.Done():
			return fmt.Errorf("dnsserver: shutdown: %w", ctx.Err())
		}
		if err := r.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("dnsserver: shutdown %s: %w", r.net, err))
		}
	}
	return errors.Join(errs...)
}

// acceptQuery replaces miekg's default filter: answers are dropped
// (never answer an answer: reflection loops), everything else reaches
// ServeDNS, which identifies the client before it says anything else, so
// an unknown source only ever gets REFUSED. A message that does not parse
// is answered FORMERR by miekg with the header only: never larger than the
// query, so no amplification.
func acceptQuery(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&(1<<15) != 0 { // QR
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	src := admit.SourceAddr(w.RemoteAddr())
	udp := w.LocalAddr() != nil && w.LocalAddr().Network() == "udp"
	// QueryTimeout applies where the query may wait (Server.slow).
	if resp := s.handle(context.Background(), src, req, udp); resp != nil {
		if err := w.WriteMsg(resp); err != nil {
			s.cfg.Logger.Debug("dns write failed", "client", src, "error", err)
		}
	}
}
