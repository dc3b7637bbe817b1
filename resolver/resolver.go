package resolver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/metrics"
)

// Config configures a Resolver: its upstream client and its cache.
type Config struct {
	// Upstreams are the recursive resolvers asked on a cache miss, as
	// "host:port" ("10.0.0.10:53"); a bare IP means port 53. They are tried
	// in order, starting with the last one that answered (failover).
	// Required: the CLI fills it from --upstream-dns or UpstreamsFromResolvConf.
	Upstreams []string
	// Timeout bounds one exchange with one upstream (UDP, and TCP again on
	// truncation). Zero means 2s.
	Timeout time.Duration
	// UDPSize is the EDNS0 buffer size advertised upstream. Zero means 1232,
	// the DNS Flag Day 2020 value that avoids IP fragmentation.
	UDPSize uint16
	// CacheSize bounds the number of cached (name, type, class) entries.
	// Zero means 10000.
	CacheSize int
	// MinTTL raises the lifetime of short-lived answers. Zero means 0 (no
	// floor).
	MinTTL time.Duration
	// MaxTTL caps the lifetime of positive answers. Zero means 1h.
	MaxTTL time.Duration
	// MaxNegativeTTL caps the lifetime of negative answers (NXDOMAIN and
	// NODATA, RFC 2308 §5). Zero means 5m.
	MaxNegativeTTL time.Duration
	// StaleFor is how long after expiry an entry may still be served when
	// every upstream fails (RFC 8767 §5 suggests 1 to 3 days). Zero means 1h;
	// negative disables serve-stale.
	StaleFor time.Duration
	// FailureTTL is how long a resolution failure of a (name, type) is
	// remembered and answered from (RFC 9520; failures.go) before an
	// upstream is asked again. Zero means 1s; negative disables it.
	FailureTTL time.Duration
	// MaxCNAME bounds the CNAME chain LookupIP follows. Zero means 8.
	MaxCNAME int
	// Now is the clock of the cache. Nil means time.Now.
	Now func() time.Time
	// Metrics receives cache and upstream counters. Required.
	Metrics *metrics.Metrics
	// Logger receives upstream failures at debug level. Nil means discard.
	Logger *slog.Logger
}

// Defaults applied by New.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultUDPSize        = 1232
	DefaultCacheSize      = 10000
	DefaultMaxTTL         = time.Hour
	DefaultMaxNegativeTTL = 5 * time.Minute
	DefaultStaleFor       = time.Hour
	DefaultMaxCNAME       = 8
	DefaultFailureTTL     = time.Second
	// staleTTL is the TTL of a stale answer given to a client, the value
	// RFC 8767 §4 recommends.
	staleTTL = 30
)

// Validate reports configuration errors a person can act on.
func (c Config) Validate() error {
	var errs []error
	if len(c.Upstreams) == 0 {
		errs = append(errs, errors.New("resolver: no upstream DNS server (set --upstream-dns or a nameserver in /etc/resolv.conf)"))
	}
	for _, u := range c.Upstreams {
		if _, err := normalizeUpstream(u); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("resolver: Config.Metrics is required"))
	}
	if c.MinTTL < 0 || c.MaxTTL < 0 || c.MaxNegativeTTL < 0 || c.Timeout < 0 || c.CacheSize < 0 || c.MaxCNAME < 0 {
		errs = append(errs, errors.New("resolver: negative TTL, timeout, cache size or CNAME bound"))
	}
	if c.MaxTTL > 0 && c.MinTTL > c.MaxTTL {
		errs = append(errs, fmt.Errorf("resolver: MinTTL %s above MaxTTL %s", c.MinTTL, c.MaxTTL))
	}
	return errors.Join(errs...)
}

func (c *Config) applyDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.UDPSize == 0 {
		c.UDPSize = DefaultUDPSize
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultMaxTTL
	}
	if c.MaxNegativeTTL == 0 {
		c.MaxNegativeTTL = DefaultMaxNegativeTTL
	}
	if c.StaleFor == 0 {
		c.StaleFor = DefaultStaleFor
	}
	if c.StaleFor < 0 {
		c.StaleFor = 0
	}
	if c.MaxCNAME == 0 {
		c.MaxCNAME = DefaultMaxCNAME
	}
	if c.FailureTTL == 0 {
		c.FailureTTL = DefaultFailureTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Resolver resolves names through its upstreams and one shared cache. The
// DNS server (Query) and the proxy (LookupIP) use the same Resolver, so a
// name the pod resolved is usually a cache hit when it connects. It is safe
// for concurrent use.
type Resolver struct {
	cfg     Config
	up      *Client
	cache   *cache
	failed  failures
	flights flightGroup
}

// New returns a Resolver for cfg after applying the defaults.
func New(cfg Config) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	up, err := NewClient(ClientConfig{Servers: cfg.Upstreams, Timeout: cfg.Timeout, UDPSize: cfg.UDPSize,
		MaxCNAME: cfg.MaxCNAME, Metrics: cfg.Metrics, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	c, err := newCache(cfg.CacheSize, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	return &Resolver{cfg: cfg, up: up, cache: c, failed: failures{max: cfg.CacheSize}}, nil
}

// UpstreamsFromResolvConf returns the nameservers of a resolv.conf file as
// "host:port" upstreams. An empty path means /etc/resolv.conf. The CLI calls
// it when --upstream-dns is not given.
func UpstreamsFromResolvConf(path string) ([]string, error) {
	cc, path, err := readResolvConf(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(cc.Servers))
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolver: %s: no nameserver line", path)
	}
	return out, nil
}

// SearchFromResolvConf returns the search domains of a resolv.conf file
// (an empty path means /etc/resolv.conf): the node's search list, which
// the DNS server and explain recognise expansions of
// (admit.Config.SearchDomains).
func SearchFromResolvConf(path string) ([]string, error) {
	cc, _, err := readResolvConf(path)
	if err != nil {
		return nil, err
	}
	return cc.Search, nil
}

// readResolvConf is the one reader of resolv.conf; an empty path means
// /etc/resolv.conf, which it returns with the file's settings.
func readResolvConf(path string) (*dns.ClientConfig, string, error) {
	if path == "" {
		path = "/etc/resolv.conf"
	}
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("resolver: read %s: %w", path, err)
	}
	return cc, path, nil
}

// normalizeUpstream turns "10.0.0.10", "10.0.0.10:53", "[::1]:53" or "::1"
// into "host:port" with an IP host: a name would need a resolver to find the
// resolver.
func normalizeUpstream(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", fmt.Errorf("resolver: upstream %q: want IP or IP:port: %w", s, err)
	}
	if ap.Port() == 0 {
		return "", fmt.Errorf("resolver: upstream %q: port 0", s)
	}
	return ap.String(), nil
}

// fqdnKey returns the cache and wire form of a name: lower case, fully
// qualified. DNS names compare case-insensitively (RFC 4343).
func fqdnKey(name string) (string, error) {
	if name == "" || name == "." {
		return "", fmt.Errorf("%w: empty", ErrInvalidName)
	}
	n := dns.Fqdn(LowerASCII(name))
	if _, ok := dns.IsDomainName(n); !ok || len(n) > 254 {
		return "", fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return n, nil
}

// LowerASCII returns s with ASCII upper case letters in lower case: DNS
// names compare case-insensitively (RFC 4343) and every other byte of a
// label is kept as is. It does not allocate when s is lower case already,
// as nearly every name asked is.
func LowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// RcodeString returns the mnemonic of a DNS response code ("NXDOMAIN"),
// or "RCODE<n>" for one without a name.
func RcodeString(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rc)
}
