package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// Lookuper resolves a destination name for the dialer: the admission
// pipeline's (admit.Lookuper). *resolver.Resolver implements it; tests use
// a static map.
type Lookuper = admit.Lookuper

// Interim is where an exchange that is still open registers for interim
// audit records (docs/design.md, "Audit record": event interim every
// --audit-interim, same id, bytes so far). *audit.Logger implements it.
// Open is called once per exchange at admission with the record's id and
// start and a snap func that returns the record as it stands (safe to call
// from another goroutine while the exchange runs); done is called once,
// before the exchange's end record is written.
type Interim interface {
	Open(id string, start time.Time, snap func() record.Record) (done func())
}

// HTTPPath is what a plain HTTP record says of the request path
// (--audit-http-path).
type HTTPPath string

// Values of Config.AuditHTTPPath.
const (
	HTTPPathNone HTTPPath = "none"
	HTTPPathFull HTTPPath = "full"
)

// Credentials answers a credential's header value: Lookup(name, format)
// returns the value of the field as one shared element (never modified),
// false when the credential is unavailable. It must not allocate: it is
// asked for each request of a rule with a credential.
type Credentials interface {
	Lookup(name, format string) ([]string, bool)
}

// Config configures a Proxy. Policy, Identity, Resolver, Guard, Audit and
// Metrics are required.
type Config struct {
	// Inputs are what every entry's admission reads (the DNS server's
	// too): Policy, called once per request so that a reload applies to
	// the next request (open connections see it when Revalidate is
	// called; nil denies everything); Identity, a connection's source IP
	// to its pod; AuditAvailable (nil: always), while false new requests
	// are refused with 503 and reason audit-unavailable (and still
	// recorded: the logger buffers what it can); Mode, enforce or audit
	// (zero: enforce).
	admit.Inputs
	// Resolver looks up destination names (the shared cache).
	Resolver Lookuper
	// Guard classifies every address before it is dialled.
	Guard *policy.Guard
	// Audit receives one record per request or tunnel.
	Audit *audit.Logger
	// Interim registers open plain HTTP requests and tunnels for interim
	// records; nil means none (only end records).
	Interim Interim
	// AuditHTTPPath is what plain HTTP records say of the request path:
	// HTTPPathNone (zero: no path; tokens live in paths too) or
	// HTTPPathFull (the path without its query, for those who accept the
	// risk).
	AuditHTTPPath HTTPPath
	// Inspect serves the tunnels whose deciding rule says inspect: true
	// (docs/design.md, "Inspection"): TLS terminated with its leaves, each
	// request decided and recorded (kind inspected). Nil means none is
	// inspected; the policy loader then refuses inspect: true.
	Inspect *inspect.Engine
	// Credentials holds the credentials inspected rules add to the
	// requests they allow (docs/design.md "Credentials"); nil holds none:
	// every request of a rule with a credential is then refused with 503,
	// reason credential-unavailable. *credentials.Store implements it.
	Credentials Credentials
	// Metrics are the collectors; tests pass metrics.New().
	Metrics *metrics.Metrics
	// Logger logs what is not an audit record (panics, server errors).
	// Nil means slog.Default().
	Logger *slog.Logger
	// DialTimeout bounds one TCP connect to one address; zero means 10s.
	DialTimeout time.Duration
	// HeaderTimeout bounds reading a request head: from the accept for a
	// connection's first request, from its first byte for the next ones.
	// A head still incomplete then is answered 408 and recorded; a
	// connection that sent nothing is closed without a record. Zero means
	// 10s.
	HeaderTimeout time.Duration
	// IdleTimeout closes a tunnel when neither direction moved a byte for
	// that long, and a kept-alive client connection between requests;
	// zero means 5m. Long-lived streams (LLM token streams, HTTP/2 with
	// pings) stay open as long as bytes flow.
	IdleTimeout time.Duration
	// PeekTimeout bounds reading the rest of a ClientHello once its first
	// byte arrived (CONNECT), or all of it (SNI listener); zero means 10s.
	PeekTimeout time.Duration
	// ResponseHeaderTimeout bounds waiting for an origin's response header
	// on forwarded plain HTTP; zero means 5m (slow, non-streaming LLM calls).
	ResponseHeaderTimeout time.Duration
	// MaxHeaderBytes bounds a request head, request line included; over it
	// the answer is 431. Zero means 32 KiB.
	MaxHeaderBytes int
	// MaxConnsPerClient bounds the connections one source IP holds open at
	// once on all listeners together (requests, tunnels and transparent
	// connections), so that one pod, or one unknown source, cannot take
	// every descriptor and goroutine of the proxy. Over it a connection is
	// answered 429 (HTTP listeners) or closed (SNI listener) and counted in
	// one summary record per client, kind and second (reason rate-limited,
	// count), so that a flood of refused connections is not a flood of
	// records. Zero means 1024; negative means no limit.
	MaxConnsPerClient int
}

// maxInspectStreams is the HTTP/2 concurrent streams an inspected tunnel
// allows when MaxConnsPerClient does not bound it lower.
const maxInspectStreams = 250

// Inspection returns c with the proxy's per-request limits, defaults
// applied, for the engine that serves inspected tunnels (docs/design.md,
// "Inspection"): MaxHeaderBytes, HeaderTimeout, IdleTimeout and
// ResponseHeaderTimeout as they are, the response head limit of the
// plain path (maxResponseHeadBytes), and HTTP/2's concurrent streams
// bounded by MaxConnsPerClient (a client holds no more requests in flight
// in one tunnel than it may hold connections), at most 250.
func (cfg Config) Inspection(c inspect.Config) inspect.Config {
	d := cfg.withDefaults()
	c.MaxHeadBytes, c.HeaderTimeout = d.MaxHeaderBytes, d.HeaderTimeout
	c.MaxResponseHeadBytes = d.maxResponseHeadBytes()
	c.IdleTimeout, c.ResponseHeaderTimeout = d.IdleTimeout, d.ResponseHeaderTimeout
	c.MaxConcurrentStreams = maxInspectStreams
	if d.MaxConnsPerClient > 0 && d.MaxConnsPerClient < maxInspectStreams {
		c.MaxConcurrentStreams = uint32(d.MaxConnsPerClient)
	}
	return c
}

// maxResponseHeadBytes is the one response head limit, of the plain path
// and of inspected tunnels (HTTP/1.1 heads, HTTP/2 header lists): four
// request heads. cfg has its defaults.
func (cfg Config) maxResponseHeadBytes() int { return 4 * cfg.MaxHeaderBytes }

// withDefaults returns cfg with zero values replaced by their meaning.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Mode == "" {
		cfg.Mode = policy.ModeEnforce
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.HeaderTimeout == 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.PeekTimeout == 0 {
		cfg.PeekTimeout = 10 * time.Second
	}
	if cfg.ResponseHeaderTimeout == 0 {
		cfg.ResponseHeaderTimeout = 5 * time.Minute
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = 32 << 10
	}
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = 1024
	}
	if cfg.AuditHTTPPath == "" {
		cfg.AuditHTTPPath = HTTPPathNone
	}
	return cfg
}

// admitConfig is the part of cfg the admission pipeline takes.
func (cfg Config) admitConfig() admit.Config {
	return admit.Config{Inputs: cfg.Inputs, Resolver: cfg.Resolver, Guard: cfg.Guard}
}

// Validate reports every missing or invalid field.
func (cfg Config) Validate() error {
	var errs []error
	// Policy, Identity, Guard and Mode: the admission pipeline's own check.
	if err := cfg.admitConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	// The pipeline may go without a resolver (explain); the proxy may not.
	if cfg.Resolver == nil {
		errs = append(errs, errors.New("Resolver is required"))
	}
	if cfg.Audit == nil {
		errs = append(errs, errors.New("Audit is required"))
	}
	if cfg.Metrics == nil {
		errs = append(errs, errors.New("Metrics is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", cfg.DialTimeout}, {"HeaderTimeout", cfg.HeaderTimeout}, {"IdleTimeout", cfg.IdleTimeout},
		{"PeekTimeout", cfg.PeekTimeout}, {"ResponseHeaderTimeout", cfg.ResponseHeaderTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must not be negative", d.name, d.v))
		}
	}
	if cfg.AuditHTTPPath != "" && cfg.AuditHTTPPath != HTTPPathNone && cfg.AuditHTTPPath != HTTPPathFull {
		errs = append(errs, fmt.Errorf("AuditHTTPPath %q: want %q or %q", cfg.AuditHTTPPath, HTTPPathNone, HTTPPathFull))
	}
	if cfg.MaxHeaderBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxHeaderBytes %d: must not be negative", cfg.MaxHeaderBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("proxy: config: %w", err)
	}
	return nil
}
