package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/internal/metrics"
)

// ClientConfig configures a Client: the servers asked and how.
type ClientConfig struct {
	// Servers are asked in order, starting with the last one that
	// answered (failover), as "IP:port"; a bare IP means port 53.
	// Required.
	Servers []string
	// Timeout bounds one exchange with one server (UDP, and TCP again on
	// truncation). Zero means 2s.
	Timeout time.Duration
	// UDPSize is the EDNS0 buffer size advertised. Zero means 1232.
	UDPSize uint16
	// MaxCNAME bounds the CNAME chain kept in an answer (Exchange). Zero
	// means 8.
	MaxCNAME int
	// Metrics counts failures and times exchanges. Required.
	Metrics *metrics.Metrics
	// Logger receives failures at debug level. Nil means discard.
	Logger *slog.Logger
}

// Client asks recursive DNS servers: UDP first, TCP when the answer comes
// back truncated, failover across servers. The Resolver uses one for its
// upstreams; the DNS server one for the cluster DNS. It is safe for
// concurrent use.
type Client struct {
	addrs     []string
	timeout   time.Duration
	udpSize   uint16
	maxCNAME  int
	tcp       *dns.Client
	pools     []*udpPool // one per address
	preferred atomic.Int32
	metrics   *metrics.Metrics
	log       *slog.Logger
	// Children of the metric vectors, looked up once.
	okSeconds, errSeconds prometheus.Observer
	errServfail           prometheus.Counter
	errTimeout, errNet    prometheus.Counter
}

// NewClient returns a Client for cfg after applying the defaults.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Metrics == nil {
		return nil, errors.New("resolver: ClientConfig.Metrics is required")
	}
	if cfg.Timeout < 0 || cfg.MaxCNAME < 0 {
		return nil, errors.New("resolver: negative timeout or CNAME bound")
	}
	c := &Client{timeout: cfg.Timeout, udpSize: cfg.UDPSize, maxCNAME: cfg.MaxCNAME, metrics: cfg.Metrics, log: cfg.Logger}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.udpSize == 0 {
		c.udpSize = DefaultUDPSize
	}
	if c.maxCNAME == 0 {
		c.maxCNAME = DefaultMaxCNAME
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, a := range cfg.Servers {
		n, err := normalizeUpstream(a)
		if err != nil {
			return nil, err
		}
		c.addrs = append(c.addrs, n)
		c.pools = append(c.pools, &udpPool{addr: n})
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("resolver: no DNS server to ask")
	}
	c.tcp = &dns.Client{Net: "tcp", Timeout: c.timeout}
	m := cfg.Metrics
	c.okSeconds, c.errSeconds = m.DNSSeconds.WithLabelValues("ok"), m.DNSSeconds.WithLabelValues("error")
	c.errServfail = m.UpstreamErrors.WithLabelValues("servfail")
	c.errTimeout, c.errNet = m.UpstreamErrors.WithLabelValues("timeout"), m.UpstreamErrors.WithLabelValues("network")
	return c, nil
}

// Servers returns the servers asked, normalized.
func (c *Client) Servers() []string { return append([]string(nil), c.addrs...) }

// Exchange asks the servers for (name, qtype, qclass), name fully
// qualified, each in turn starting with the one that answered last, until
// one gives a usable answer: NOERROR or NXDOMAIN. SERVFAIL, REFUSED and the
// rest count as failures and move on (RFC 8767 treats them as "no answer"
// for serve-stale too). The answer returned is filtered (OwnedAnswer):
// only the records of name and its CNAME chain, no ech SvcParam, no
// addresses in the authority section, no additional section. Errors wrap
// ErrUpstream or the context's error.
func (c *Client) Exchange(ctx context.Context, name string, qtype, qclass uint16) (*dns.Msg, string, error) {
	return c.exchange(ctx, time.Time{}, name, qtype, qclass)
}

// exchange is Exchange also bounded by until (zero: no bound of its own):
// the Resolver's fetch passes its bound so, on a context that is never
// cancelled, without a context timer of its own (four timers a miss were a
// sixth of the CPU of a server whose every query is a miss).
func (c *Client) exchange(ctx context.Context, until time.Time, name string, qtype, qclass uint16) (*dns.Msg, string, error) {
	q := newQuery(name, qtype, qclass, c.udpSize)
	n := len(c.addrs)
	start := int(c.preferred.Load())
	var errs []error
	for i := 0; i < n; i++ {
		idx := (start + i) % n
		addr := c.addrs[idx]
		t0 := time.Now()
		resp, err := c.exchangeOne(ctx, until, idx, q)
		if err == nil && resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
			err = fmt.Errorf("%s: rcode %s", addr, RcodeString(resp.Rcode))
			c.errServfail.Inc()
		} else if err != nil {
			c.errorCounter(err).Inc()
			err = fmt.Errorf("%s: %w", addr, err)
		}
		if err == nil {
			c.okSeconds.Observe(time.Since(t0).Seconds())
			if idx != start {
				c.preferred.Store(int32(idx))
			}
			filterAnswer(resp, name, c.maxCNAME)
			return resp, addr, nil
		}
		c.errSeconds.Observe(time.Since(t0).Seconds())
		c.log.Debug("dns upstream failed", "upstream", addr, "name", name, "error", err)
		errs = append(errs, err)
		if ctx.Err() != nil || !until.IsZero() && !time.Now().Before(until) {
			break
		}
	}
	return nil, "", fmt.Errorf("%w: %w", ErrUpstream, errors.Join(errs...))
}

// newQuery builds the message sent upstream for (name, qtype): recursion
// desired, EDNS0 with our buffer size and nothing of the client's options
// (no client subnet, no cookies: the upstream learns nothing about pods).
func newQuery(name string, qtype, qclass uint16, udpSize uint16) *dns.Msg {
	m := new(dns.Msg)
	m.RecursionDesired = true
	m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
	m.SetEdns0(udpSize, false)
	return m
}

// exchangeOne does one UDP exchange with server idx, and a TCP one when
// the answer is truncated (RFC 7766 §5: TC means retry over TCP), within
// Timeout, ctx's deadline and until.
func (c *Client) exchangeOne(ctx context.Context, until time.Time, idx int, q *dns.Msg) (*dns.Msg, error) {
	dl := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	if !until.IsZero() && until.Before(dl) {
		dl = until
	}
	resp, err := c.pools[idx].exchange(ctx, dl, q, c.udpSize)
	if err != nil {
		return nil, err
	}
	if resp.Truncated {
		tctx, cancel := context.WithDeadline(ctx, dl)
		defer cancel()
		q.Id = dns.Id()
		resp, _, err = c.tcp.ExchangeContext(tctx, q, c.addrs[idx])
		if err != nil {
			return nil, fmt.Errorf("tcp after truncation: %w", err)
		}
		if resp.Truncated {
			// TC over TCP has no retry left: a truncated answer is no
			// answer (its empty sections would be cached as NODATA).
			return nil, errors.New("tcp after truncation: truncated again")
		}
	}
	if err := checkResponse(q, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// udpPool keeps connected UDP sockets to one server for reuse, as
// CoreDNS's forward plugin does: a socket per query costs socket(2),
// connect(2), the poller's registration and close(2), more than the
// exchange itself, and was most of a cache miss's CPU. A socket serves one
// query at a time and is closed udpMaxAge after it was opened, so the
// source port still changes (RFC 5452 §9.2); the 16-bit ID is random per
// query (math/rand/v2: ChaCha8 seeded by the kernel), a connected socket
// only accepts datagrams from its server, and the answer must match the
// ID and the question (checkResponse).
type udpPool struct {
	addr string
	mu   sync.Mutex
	idle []*pooledConn
}

type pooledConn struct {
	c    *net.UDPConn
	born time.Time
}

const (
	udpMaxAge  = 10 * time.Second
	udpMaxIdle = 256
)

var dialer net.Dialer

func (p *udpPool) get(ctx context.Context, now time.Time) (*pooledConn, error) {
	p.mu.Lock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		pc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now.Sub(pc.born) < udpMaxAge {
			p.mu.Unlock()
			return pc, nil
		}
		pc.c.Close()
	}
	p.mu.Unlock()
	c, err := dialer.DialContext(ctx, "udp", p.addr)
	if err != nil {
		return nil, err
	}
	return &pooledConn{c: c.(*net.UDPConn), born: now}, nil
}

func (p *udpPool) put(pc *pooledConn, now time.Time) {
	p.mu.Lock()
	if len(p.idle) < udpMaxIdle && now.Sub(pc.born) < udpMaxAge {
		p.idle = append(p.idle, pc)
		pc = nil
	}
	p.mu.Unlock()
	if pc != nil {
		pc.c.Close()
	}
}

var udpBufs = sync.Pool{New: func() any { b := make([]byte, dns.MaxMsgSize); return &b }}

// exchange sends q (a fresh random ID) on a pooled socket and reads until
// the answer with that ID arrives, or dl, or ctx ends: a late answer to an
// earlier query of the same socket is skipped.
func (p *udpPool) exchange(ctx context.Context, dl time.Time, q *dns.Msg, size uint16) (*dns.Msg, error) {
	now := time.Now()
	pc, err := p.get(ctx, now)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if ok {
			p.put(pc, time.Now())
		} else {
			pc.c.Close()
		}
	}()
	_ = pc.c.SetDeadline(dl)
	stop := func() bool { return true }
	if ctx.Done() != nil { // a context that can end before dl
		stop = context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	buf := *bp
	q.Id = uint16(rand.Uint32())
	out, err := q.PackBuffer(buf)
	if err != nil {
		return nil, err
	}
	if _, err := pc.c.Write(out); err != nil {
		return nil, err
	}
	beforeWait(ctx) // the upstream works meanwhile
	buf = buf[:max(int(size), dns.MinMsgSize)]
	for {
		n, err := pc.c.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if n < 12 || uint16(buf[0])<<8|uint16(buf[1]) != q.Id {
			continue // a late answer to an earlier query, or noise
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(buf[:n]); err != nil {
			return nil, fmt.Errorf("bad answer: %w", err)
		}
		ok = stop()
		return resp, nil
	}
}

// checkResponse rejects an answer to a different question: the ID is
// checked by the exchange, the question here (RFC 5452 §9.1).
func checkResponse(q, resp *dns.Msg) error {
	if !resp.Response {
		return errors.New("answer without QR bit")
	}
	if len(resp.Question) != 1 {
		// Some servers omit the question on errors; only accept that on
		// rcodes that carry no data.
		if resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError {
			return errors.New("answer without question")
		}
		return nil
	}
	a, b := resp.Question[0], q.Question[0]
	if a.Qtype != b.Qtype || a.Qclass != b.Qclass || !strings.EqualFold(a.Name, b.Name) {
		return fmt.Errorf("answer to another question %s", a.String())
	}
	return nil
}

func (c *Client) errorCounter(err error) prometheus.Counter {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return c.errTimeout
	}
	return c.errNet
}
