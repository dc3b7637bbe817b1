package inspect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Config configures an Engine. Zero values mean the defaults.
type Config struct {
	// Leaves mints the leaf certificates; required.
	Leaves *Leaves
	// Roots verify origins; nil means the system roots. UpstreamRoots
	// builds system roots plus an --upstream-ca bundle.
	Roots *x509.CertPool
	// HandshakeTimeout bounds both TLS handshakes; zero means 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a tunnel with no request for this long; zero
	// means 90s.
	IdleTimeout time.Duration
	// MaxHeadBytes bounds an HTTP/1.1 request head, request line
	// included, and an HTTP/2 header list (RFC 9113 §6.5.2: each field's
	// name and value plus 32); over it the answer is 431. Zero means 16
	// KiB (the size of the pooled head buffer an exchange takes). The
	// proxy passes its own MaxHeaderBytes (proxy.Config.Inspection).
	MaxHeadBytes int
	// MaxResponseHeadBytes bounds what egressd reads of an origin's
	// response head: on HTTP/1.1 the status line and fields, every
	// interim 1xx head before them counted together, and on HTTP/2 the
	// header list it advertises (SETTINGS_MAX_HEADER_LIST_SIZE) and
	// holds the origin to, trailers included. Over it the answer is 502
	// upstream-error (http1.ErrResponseHeadTooLarge, ExchangeRecord.HeadTooLarge).
	// Zero means 4 × MaxHeadBytes; the proxy passes the plain path's own
	// limit (proxy.Config.Inspection).
	MaxResponseHeadBytes int
	// HeaderTimeout bounds reading an HTTP/1.1 request head from its
	// first byte; a head still incomplete then is answered 408 and the
	// tunnel closes. Zero means 10s.
	HeaderTimeout time.Duration
	// ResponseHeaderTimeout bounds waiting for the origin's response
	// header to one request; over it the answer is 504. Zero means 5m.
	ResponseHeaderTimeout time.Duration
	// MaxConcurrentStreams is the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS
	// egressd advertises to the client; a stream over it is reset by
	// x/net/http2 and recorded (reason rate-limited). Zero means 250.
	MaxConcurrentStreams uint32
	// RecordPath puts the request path (never the query) in each
	// ExchangeRecord: --audit-http-path full. False records no path.
	RecordPath bool
}

// Engine serves inspected tunnels. Safe for concurrent use.
type Engine struct {
	cfg   Config
	pools pools
	// h2base carries the HTTP/2 header list limit to x/net/http2's
	// server (ServeConnOpts.BaseConfig); shared by every tunnel.
	h2base *http.Server
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Leaves == nil {
		return nil, errors.New("inspect: Config.Leaves is required")
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.MaxHeadBytes <= 0 {
		cfg.MaxHeadBytes = 16 << 10
	}
	if cfg.MaxResponseHeadBytes <= 0 {
		cfg.MaxResponseHeadBytes = 4 * cfg.MaxHeadBytes
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 10 * time.Second
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = 5 * time.Minute
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 250
	}
	e := &Engine{cfg: cfg, h2base: &http.Server{MaxHeaderBytes: h2HeaderListCap(cfg.MaxHeadBytes)}}
	e.pools.init(cfg.MaxHeadBytes)
	return e, nil
}

// UpstreamRoots returns the system roots plus the PEM certificates of
// bundle (--upstream-ca); an empty bundle means the system roots alone.
func UpstreamRoots(bundle []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if len(bundle) > 0 && !pool.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("%w: no certificate in the --upstream-ca bundle", ErrBadPEM)
	}
	return pool, nil
}

// Args are one inspected tunnel's connections and callbacks. D is the
// caller's decision type: Decide returns it in each Verdict, and Record
// gets it back, typed, with the request's exchange.
type Args[D any] struct {
	// Client is the client's connection after CONNECT's 200 (bytes
	// already read from it, such as a peeked ClientHello, replayed).
	Client net.Conn
	// Upstream is the TCP connection to the guard-checked origin address,
	// already dialled by the proxy.
	Upstream net.Conn
	// Host and Port are the tunnel's (CONNECT's) host and port.
	Host string
	Port int
	// Decide decides each request; required.
	Decide func(Request) Verdict[D]
	// Record receives each exchange; nil records nothing.
	Record func(ExchangeRecord[D])
	// Established, when set, is called once both handshakes completed,
	// before the first request, with the tunnel as it stands (Inspected,
	// ALPN, Origin): for interim records of the tunnel.
	Established func(Tunnel)
	// Requests, when set, is the tunnel's request counter: the engine adds
	// one as each request begins (HTTP/2 streams concurrently), so that
	// the caller can read the count while the tunnel runs. Nil means a
	// counter of the engine's own. Tunnel.Requests is its final value.
	Requests *atomic.Int64
}

// Serve inspects one tunnel with e until either side ends it or ctx is
// done, and returns the tunnel's record. It closes both connections. The
// error says why the tunnel ended when it ended other than by a close (nil
// then). A function, not a method of Engine: the decision type is the
// tunnel's (Args), and a method cannot take a type parameter.
func Serve[D any](ctx context.Context, e *Engine, a Args[D]) (Tunnel, error) {
	if a.Decide == nil || a.Client == nil || a.Upstream == nil {
		return Tunnel{}, errors.New("inspect: Serve needs Client, Upstream and Decide")
	}
	defer a.Client.Close()
	defer a.Upstream.Close()
	// The engine owns the connections' timing from here: a deadline the
	// caller left (the proxy's ClientHello peek) would otherwise end an
	// HTTP/2 tunnel, whose server sets none, in the middle of its streams.
	if err := a.Client.SetDeadline(time.Time{}); err != nil {
		return Tunnel{}, fmt.Errorf("inspect: client connection: %w", err)
	}
	if err := a.Upstream.SetDeadline(time.Time{}); err != nil {
		return Tunnel{}, fmt.Errorf("inspect: upstream connection: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		a.Client.Close()
		a.Upstream.Close()
	})
	defer stop()

	t := Tunnel{Outcome: OutcomeOK}
	client, upstream, err := e.handshake(ctx, a.Client, a.Upstream, a.Host, &t)
	if err != nil {
		return t, err
	}
	t.Inspected = true
	s := &session[D]{e: e, a: &a, t: &t, client: client, upstream: upstream, requests: a.Requests}
	s.uplim.r = upstream
	if s.requests == nil {
		s.requests = new(atomic.Int64)
	}
	if a.Established != nil {
		a.Established(t)
	}
	if t.ALPN == "h2" {
		err = s.serveH2(ctx)
	} else {
		err = s.serveH1(ctx)
	}
	// An HTTP/2 handler may still be finishing after ServeConn returns:
	// the counter is atomic.
	t.Requests = s.requests.Load()
	return t, err
}

// handshake does the upstream handshake inside the client's (once its
// ClientHello is read: the SNI to check, the ALPN to offer), so that the
// client is answered with the protocol the origin chose, and an origin
// that fails verification is never presented: the client's handshake
// fails before it completes.
func (e *Engine) handshake(ctx context.Context, clientConn, upstreamConn net.Conn, host string, t *Tunnel) (*tls.Conn, *tls.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
	defer cancel()
	var (
		upstream *tls.Conn
		upErr    error
	)
	leafCert := e.cfg.Leaves.GetCertificate(host)
	leafSent := false // the handshake reached egressd's leaf
	getCert := func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := leafCert(hello)
		leafSent = err == nil
		return c, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hello.ServerName != "" && !sameHost(hello.ServerName, host) {
				t.Outcome = OutcomeRefused
				return nil, fmt.Errorf("%w: SNI %q in a tunnel to %q", ErrSNIMismatch, hello.ServerName, host)
			}
			if slices.Contains(hello.Extensions, extECH) {
				t.Outcome = OutcomeRefused
				return nil, ErrECH
			}
			upstream, upErr = e.dialTLS(ctx, upstreamConn, host, offer(hello.SupportedProtos))
			if upErr != nil {
				t.Outcome, t.VerifyError = OutcomeUpstreamTLSFailed, verifyClass(upErr)
				return nil, upErr
			}
			st := upstream.ConnectionState()
			if len(st.PeerCertificates) > 0 {
				c := st.PeerCertificates[0]
				t.Origin = OriginCert{Subject: c.Subject.String(), Issuer: c.Issuer.String(), NotAfter: c.NotAfter}
			}
			t.ALPN = st.NegotiatedProtocol
			var protos []string
			if t.ALPN != "" {
				protos = []string{t.ALPN}
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert, NextProtos: protos}, nil
		},
	}
	client := tls.Server(clientConn, cfg)
	if err := client.HandshakeContext(ctx); err != nil {
		if upErr != nil {
			return nil, nil, upErr
		}
		if t.Outcome == OutcomeOK {
			t.Outcome = OutcomeClientTLSFailed
		}
		if leafSent && t.Outcome == OutcomeClientTLSFailed {
			return nil, nil, fmt.Errorf("%w: tunnel to %q: %s", ErrClientRefusedLeaf, host, clientRefusal(err))
		}
		return nil, nil, fmt.Errorf("inspect: client TLS with %q: %w", host, err)
	}
	return client, upstream, nil
}

// clientRefusal says how a client refused the leaf: the alert it sent
// ("remote error: tls: unknown certificate authority"), or, when egressd
// could not read one, that it closed the handshake. A TLS 1.3 client sends
// its alert under the handshake keys after the server's flight, which
// crypto/tls reports as "local error: tls: bad record MAC": that error
// names egressd's side, not what happened.
func clientRefusal(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "remote error: tls: "); i >= 0 {
		return "its alert: " + msg[i+len("remote error: tls: "):]
	}
	return "it ended the handshake without an alert egressd could read"
}

// extECH is the encrypted_client_hello extension (RFC 9849).
const extECH = 0xfe0d

// offer returns the protocols to offer the origin: the client's offer
// among h2 and http/1.1, in the client's order; http/1.1 when the client
// offered neither.
func offer(client []string) []string {
	var out []string
	for _, p := range client {
		if (p == "h2" || p == "http/1.1") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{"http/1.1"}
	}
	return out
}

// dialTLS opens the TLS connection to the origin over a.Upstream: SNI the
// tunnel host, full verification against Config.Roots.
func (e *Engine) dialTLS(ctx context.Context, upstreamConn net.Conn, host string, protos []string) (*tls.Conn, error) {
	c := tls.Client(upstreamConn, &tls.Config{
		ServerName: host,
		RootCAs:    e.cfg.Roots,
		NextProtos: protos,
		MinVersion: tls.VersionTLS12,
	})
	if err := c.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUpstreamTLS, host, err)
	}
	return c, nil
}

// verifyClass names the class of an upstream TLS failure, for the record.
func verifyClass(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &unknown):
		return "unknown-authority"
	case errors.As(err, &hostname):
		return "hostname-mismatch"
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			if invalid.Cert != nil && time.Now().Before(invalid.Cert.NotBefore) {
				return "not-yet-valid"
			}
			return "expired"
		}
		return "invalid-certificate"
	case errors.As(err, &alert):
		return "alert:" + alert.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "handshake"
}
