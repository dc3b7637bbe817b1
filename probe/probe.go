package probe

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EDNSOptionCode is the EDNS0 option (RFC 6891 §6.1.2, local/experimental
// range 65001–65534) that carries a probe's name in its DNS query; the
// resolver records its value as the record's probe field.
const EDNSOptionCode = 65431

// Header carries a probe's name in its CONNECT; the proxy records its value
// as the record's probe field.
const Header = "Egressd-Probe"

// DefaultProxyPort is egressd's proxy port, used when --proxy has none.
const DefaultProxyPort = "3128"

// Config says where egressd listens and how to reach it.
type Config struct {
	// Proxy is egressd's proxy address, host:port (ParseProxy turns a URL
	// into one). Required: every check has a proxy step.
	Proxy string
	// DNS is egressd's resolver, host:port; empty means no DNS steps (the
	// checks that ask for one are counted in Report.DNSNotRun).
	DNS string
	// Direct are host:port targets connected to without the proxy; each
	// must fail. Empty means no bypass check.
	Direct []string
	// Timeout bounds each step; zero means 5s.
	Timeout time.Duration
	// Source is the local address every step connects from; the zero
	// value means the system's choice.
	Source netip.Addr
	// Parallel is how many steps run at once; zero means 4.
	Parallel int
	// UserAgent is sent with each CONNECT; empty means "egressd-probe".
	UserAgent string
	// InspectCA is the roots trusted inside an inspected tunnel (egressd's
	// inspection CA, --inspect-ca) by a check with a path and no ca of its
	// own; nil means such a check sees no decision.
	InspectCA *x509.CertPool
	// CAs holds the ca bundle of each check that names one, by the path
	// as written (LoadCAs); a check whose ca is missing here sees no
	// decision.
	CAs map[string]*x509.CertPool
	// Resolver resolves Direct targets given by name; nil means
	// net.DefaultResolver (in a pod: egressd, when it is the pod's resolver).
	Resolver *net.Resolver
}

// Validate checks the configuration, with errors a person can act on.
func (c Config) Validate() error {
	if c.Proxy == "" {
		return fmt.Errorf("%w: the proxy address is required", ErrConfig)
	}
	for _, a := range append([]string{c.Proxy, c.DNS}, c.Direct...) {
		if a == "" {
			continue
		}
		if _, _, err := splitHostPort(a); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if c.Timeout < 0 || c.Parallel < 0 {
		return fmt.Errorf("%w: timeout and parallel must not be negative", ErrConfig)
	}
	return nil
}

// ParseProxy turns --proxy (http://HOST:PORT, HOST:PORT, or either without
// a port, meaning 3128) into host:port.
func ParseProxy(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: proxy %q: %w", ErrConfig, s, err)
	}
	switch {
	case u.Scheme != "http":
		return "", fmt.Errorf("%w: proxy %q: scheme %q: egressd's proxy speaks plain http://", ErrConfig, s, u.Scheme)
	case u.User != nil:
		return "", fmt.Errorf("%w: proxy %q: egressd takes no proxy credentials; drop the user part", ErrConfig, u.Redacted())
	case u.Hostname() == "":
		return "", fmt.Errorf("%w: proxy %q: no host", ErrConfig, s)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("%w: proxy %q: want http://HOST:PORT, nothing after the port", ErrConfig, s)
	}
	port := u.Port()
	if port == "" {
		port = DefaultProxyPort
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	if _, _, err := splitHostPort(addr); err != nil {
		return "", fmt.Errorf("%w: proxy %q: %w", ErrConfig, s, err)
	}
	return addr, nil
}

// WithDefaultPort appends port to addr when it has none ("10.96.0.53" →
// "10.96.0.53:53"; "[::1]" and "::1" → "[::1]:53").
func WithDefaultPort(addr, port string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), port)
}

func splitHostPort(a string) (string, int, error) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: want HOST:PORT: %w", a, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || h == "" {
		return "", 0, fmt.Errorf("address %q: want HOST:PORT with a port 1-65535", a)
	}
	return h, n, nil
}

func parseIP(h string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(h)
	return a, err == nil
}

// Report is the outcome of a run: one Result per step, in the order of
// the checks (controls first), then the direct steps.
type Report struct {
	Results []Result
	// DNSNotRun counts checks with dns: true that had no DNS step because
	// no resolver address was given.
	DNSNotRun int
	Started   time.Time
	Duration  time.Duration
}

// Runner runs checks against one egressd.
type Runner struct {
	cfg Config
}

// New validates cfg, applies its defaults and returns a Runner.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "egressd-probe"
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	return &Runner{cfg: cfg}, nil
}

type step struct {
	check Check
	via   Via
}

// Run runs every check (proxy step, and DNS step where asked and possible)
// and the direct steps, at most Parallel at once, and judges each.
func (r *Runner) Run(ctx context.Context, checks []Check) *Report {
	rep := &Report{Started: time.Now()}
	var steps []step
	for _, c := range checks {
		steps = append(steps, step{c, ViaProxy})
		if c.DNS {
			if r.cfg.DNS == "" {
				rep.DNSNotRun++
				continue
			}
			steps = append(steps, step{c, ViaDNS})
		}
	}
	for _, a := range r.cfg.Direct {
		h, p, _ := splitHostPort(a) // Validate checked it
		steps = append(steps, step{Check{Name: controlPrefix + "direct:" + a, Host: h, Port: p, Expect: ExpectDeny}, ViaDirect})
	}
	rep.Results = make([]Result, len(steps))
	sem := make(chan struct{}, r.cfg.Parallel)
	var wg sync.WaitGroup
	for i, s := range steps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rep.Results[i] = r.runStep(ctx, s)
		}()
	}
	wg.Wait()
	rep.Duration = time.Since(rep.Started)
	return rep
}

func (r *Runner) runStep(ctx context.Context, s step) Result {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	start := time.Now()
	var res Result
	switch s.via {
	case ViaProxy:
		res = r.connect(ctx, s.check)
	case ViaDNS:
		res = r.query(ctx, s.check)
	case ViaDirect:
		res = r.direct(ctx, s.check)
	}
	res.Check, res.Via, res.Duration = s.check, s.via, time.Since(start)
	res.judge()
	return res
}

// dialer connects from the configured source address.
func (r *Runner) dialer(network string) *net.Dialer {
	d := &net.Dialer{}
	if r.cfg.Source.IsValid() {
		if network == "udp" {
			d.LocalAddr = &net.UDPAddr{IP: r.cfg.Source.AsSlice()}
		} else {
			d.LocalAddr = &net.TCPAddr{IP: r.cfg.Source.AsSlice()}
		}
	}
	return d
}
