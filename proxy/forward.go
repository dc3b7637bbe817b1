package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// forwarder relays plain HTTP requests (absolute-form on the proxy
// listener, Host-based on the Host listener) through httputil.ReverseProxy,
// writing to the connection's http1.ResponseWriter.
//
// Upstream connections are not kept alive: a pooled connection was dialled
// for an earlier request's decision (its rule's cidrs, its guard check), and
// reusing it for another pod or rule would skip the check. Each request is
// decided, resolved, guard-checked and dialled on its own, and its record
// carries its own dns and peer. Plain HTTP egress is rare next to CONNECT;
// correctness wins over a saved handshake.
type forwarder struct {
	p  *Proxy
	rp *httputil.ReverseProxy
}

type exchangeKey struct{}

func newForwarder(p *Proxy) *forwarder {
	tr := &http.Transport{
		Proxy:                  nil, // never a proxy from the environment
		DialContext:            p.dialForTransport,
		DisableKeepAlives:      true,
		DisableCompression:     true, // relay bytes as sent; the client decides
		ResponseHeaderTimeout:  p.cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: int64(p.cfg.maxResponseHeadBytes()),
		ForceAttemptHTTP2:      false,
	}
	f := &forwarder{p: p}
	f.rp = &httputil.ReverseProxy{
		Rewrite:        f.rewrite,
		Transport:      tr,
		FlushInterval:  -1,                                                  // stream as it comes: SSE token streams
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelDebug), // body copy errors are in the record
		ModifyResponse: f.modifyResponse,
		ErrorHandler:   f.errorHandler,
	}
	return f
}

// dialForTransport is the Transport's DialContext: the guarded dialer of
// the request's exchange. ctx does not end with the request (the Transport
// dials on context.WithoutCancel), so the dial works on a copy of what it
// needs and its results (decision, dns, peer) reach the exchange only while
// the request is live; a dial that ends after the request is closed.
func (p *Proxy) dialForTransport(ctx context.Context, network, addr string) (net.Conn, error) {
	ex, ok := ctx.Value(exchangeKey{}).(*exchange)
	if !ok {
		return nil, fmt.Errorf("%w: no exchange for %s", ErrDenied, addr)
	}
	ex.mu.Lock()
	live := ex.live
	if ex.closed || live.Err() != nil {
		ex.mu.Unlock()
		return nil, fmt.Errorf("proxy: dial %s: request ended: %w", addr, context.Canceled)
	}
	dec, host, port := ex.decisionLocked(), ex.host, ex.port
	ex.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(live, cancel)()
	c, h := p.routeAndDial(ctx, dec, host, port)

	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || live.Err() != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("proxy: dial %s: request ended: %w", addr, context.Canceled)
	}
	ex.applyLocked(&h)
	rf := h.rf
	if rf != nil {
		return nil, rf
	}
	return c, nil
}

// rewrite builds the outbound request. ReverseProxy has already removed the
// hop-by-hop headers of RFC 9110 §7.6.1 (Connection and the fields it names,
// Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade, Proxy-Connection,
// Proxy-Authenticate, Proxy-Authorization) and the client's Forwarded and
// X-Forwarded-*; every other Proxy-* field goes too, and no X-Forwarded-*
// is added: the pod's address stays inside. Expect goes as well: egressd
// answers 100 Continue itself when the body is first read. Egressd-Probe
// never got into the header (the head reader keeps it for the record).
func (f *forwarder) rewrite(pr *httputil.ProxyRequest) {
	ex := pr.In.Context().Value(exchangeKey{}).(*exchange)
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort(ex.host, strconv.Itoa(ex.port))
	out.URL.User = nil
	// The Host the origin sees is the name that was decided, not the
	// client's spelling of it: "MODELS.TEST.", a Unicode name (decided as
	// its punycode) or a transparent request's Host port must not let a
	// virtual host other than the decided one answer (RFC 9112 §3.2.2: the
	// proxy replaces Host with the target URI's authority).
	out.Host = hostHeader(ex.host, ex.port)
	for k := range out.Header {
		if strings.HasPrefix(k, "Proxy-") {
			delete(out.Header, k)
		}
	}
	out.Header.Del("Expect")
	out.RequestURI = ""
}

// modifyResponse records the status and a redirect's host (only its host:
// a Location carries paths and signed queries), watches the body for an
// upstream failure and starts the idle watch of the body's streaming.
func (f *forwarder) modifyResponse(resp *http.Response) error {
	ex := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	// The host a browser-grade client follows, flagged when RFC 3986
	// parsing reads another (docs/design.md, "Audit record").
	redirect, ambiguous := http1.RedirectHost(resp.Request.URL, resp.Header.Get("Location"))
	ex.mu.Lock()
	ex.rec.HTTP = httpOf(ex.rec.HTTP, resp.StatusCode)
	ex.rec.HTTP.RedirectHost, ex.rec.HTTP.RedirectAmbiguous = redirect, ambiguous
	ex.mu.Unlock()
	if w := ex.idle; w != nil {
		w.start()
	}
	resp.Body = &upstreamBody{ReadCloser: resp.Body, ex: ex}
	return nil
}

// errorHandler answers a request that got no response: refused by the
// dialer (a refusal: denial or dial failure), or failed after the
// connection was made (upstream-error: the origin closed or reset before
// answering, 502; its response header timed out, 504).
func (f *forwarder) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex := r.Context().Value(exchangeKey{}).(*exchange)
	var rf *refusal
	if !errors.As(err, &rf) {
		if errors.Is(err, context.Canceled) {
			// The client left (or the drain cut it): nobody to answer.
			ex.setError("client aborted")
			return
		}
		status := http.StatusBadGateway
		if isTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		if responseHeadTooLarge(err) {
			// net/http's own words name no class: the one class of
			// both paths, counted (egressd_response_heads_too_large_total).
			err = fmt.Errorf("%w: over %d bytes", http1.ErrResponseHeadTooLarge, f.p.cfg.maxResponseHeadBytes())
			f.p.m.ResponseHeadsTooLarge.WithLabelValues(record.KindHTTP).Inc()
		}
		rf = failure(status, record.OutcomeUpstreamError, fmt.Errorf("%w: %w", ErrUpstream, err))
	}
	ex.mu.Lock()
	ex.failure = rf.after // "" for the dial's denial
	ex.mu.Unlock()
	ex.setError(err.Error())
	writeRefusal(w, ex, rf)
}

// responseHeadTooLarge reports whether err is net/http Transport's for a
// response head over MaxResponseHeaderBytes (not exported: matched by its
// text, which TestPlainResponseHeadBounded holds).
func responseHeadTooLarge(err error) bool {
	return strings.Contains(err.Error(), "server response headers exceeded")
}

// upstreamBody is a response body from the origin: a read error other
// than EOF (the origin reset or closed inside its body) is remembered, so
// that the client's response is cut rather than completed and the record
// says upstream-error.
type upstreamBody struct {
	io.ReadCloser
	ex *exchange
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.ex.idle != nil {
		b.ex.idle.touch()
	}
	if err != nil && err != io.EOF {
		b.ex.mu.Lock()
		if b.ex.bodyErr == nil {
			b.ex.bodyErr = err
		}
		b.ex.mu.Unlock()
	}
	return n, err
}

// httpOf returns h (or a new one) with the status set.
func httpOf(h *record.HTTP, status int) *record.HTTP {
	if h == nil {
		h = &record.HTTP{}
	}
	h.Status = status
	return h
}

// countingBody counts request body bytes read by the transport.
type countingBody struct {
	io.ReadCloser
	ex *exchange
}

func (b countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.ex.sent.Add(int64(k))
	if k > 0 && b.ex.idle != nil {
		b.ex.idle.touch()
	}
	return k, err
}

// countingWriter counts response bytes; Unwrap keeps Flush and friends
// reachable through http.ResponseController.
type countingWriter struct {
	http.ResponseWriter
	ex *exchange
}

func (w countingWriter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	w.ex.recv.Add(int64(k))
	return k, err
}

func (w countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// forward decides one plain HTTP request and forwards it. host and port
// are the destination; ex already holds the client.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, ex *exchange, host string, port int) {
	if rf := p.admit(ex, host, port); rf != nil {
		ex.setError(rf.Error())
		writeRefusal(w, ex, rf)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// An upgraded connection would become a tunnel that this path
		// neither observes nor tracks for drain; CONNECT is the way.
		p.refuseBadRequest(w, ex, ex.host, errors.New("upgrade is not supported on plain HTTP; use CONNECT"))
		return
	}
	if p.cfg.Interim != nil {
		defer p.cfg.Interim.Open(ex.rec.ID, ex.start, ex.snapshot)()
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = countingBody{ReadCloser: r.Body, ex: ex}
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), exchangeKey{}, ex))
	defer cancel()
	defer p.watchRequest(ex, cancel, clientConn(w))() // revocation (revoke.go)
	// Once the response header is in, a body that moves no byte either way
	// for IdleTimeout ends the request (outcome idle-timeout).
	ex.idle = newIdleWatch(p.cfg.IdleTimeout, cancel)
	defer ex.idle.stop()
	ex.live = ctx // before the Transport's dial goroutine starts
	defer func() { ex.rec.BytesSent, ex.rec.BytesReceived = ex.sent.Load(), ex.recv.Load() }()
	p.fwd.rp.ServeHTTP(countingWriter{ResponseWriter: w, ex: ex}, r.WithContext(ctx))
}

// forwardedAfter is what happened to a plain HTTP request once it was
// decided, the one place that says it (its record's outcome:
// record.OutcomeOf), when its handler returned: revoked by a revalidation
// pass; cut at the drain deadline (cut); idle for IdleTimeout; refused
// after its decision (route, dial or upstream failure: errorHandler); an
// origin that failed inside its body while the client stayed (left: the
// client's side ended). The record's error says which. "" for none.
func (ex *exchange) forwardedAfter(cut, left bool) string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	switch {
	case ex.revoked:
		ex.rec.Error = ErrRevoked.Error()
		return record.OutcomeRevoked
	case cut:
		ex.rec.Error = ErrCut.Error()
		return record.OutcomeDrained
	case ex.idle != nil && ex.idle.fired.Load():
		ex.rec.Error = ErrIdle.Error()
		return record.OutcomeIdleTimeout
	case ex.failure != "":
		return ex.failure
	case ex.bodyErr != nil && !left:
		ex.rec.Error = audit.RedactText(fmt.Errorf("%w: %w", ErrUpstream, ex.bodyErr).Error())
		return record.OutcomeUpstreamError
	}
	return ""
}

// idleWatch ends a streaming plain HTTP response when no byte moved either
// way for its timeout: one timer per request, moved on by touch only when
// it fires (as the tunnel's deadline is).
type idleWatch struct {
	timeout time.Duration
	cancel  context.CancelFunc
	last    atomic.Int64 // unix nanoseconds of the last byte either way
	fired   atomic.Bool
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

func newIdleWatch(timeout time.Duration, cancel context.CancelFunc) *idleWatch {
	return &idleWatch{timeout: timeout, cancel: cancel}
}

func (w *idleWatch) touch() { w.last.Store(time.Now().UnixNano()) }

func (w *idleWatch) start() {
	w.touch()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && w.t == nil {
		w.t = time.AfterFunc(w.timeout, w.check)
	}
}

func (w *idleWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if left := time.Until(time.Unix(0, w.last.Load()).Add(w.timeout)); left > 0 {
		w.t.Reset(left)
		return
	}
	w.fired.Store(true)
	w.cancel()
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
}

// hostHeader is the Host field for a decided host and port: the port is
// left out when it is the default of http (RFC 9110 §7.2), an IPv6 literal
// is bracketed.
func hostHeader(host string, port int) string {
	if port == 80 {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// badRequest is the refusal of a request whose target is no destination
// (bad-request, 400, in every mode): the record keeps the host as the
// client named it (admit.RecordedHost), and identifies the client.
func (p *Proxy) badRequest(ex *exchange, rawHost string, err error) *refusal {
	ex.host = admit.RecordedHost(rawHost)
	p.identify(ex)
	return deny(http.StatusBadRequest, ex.fold(policy.Denied(policy.ReasonBadRequest)), err)
}

// refuseBadRequest answers 400 bad-request through w (badRequest).
func (p *Proxy) refuseBadRequest(w http.ResponseWriter, ex *exchange, rawHost string, err error) {
	rf := p.badRequest(ex, rawHost, err)
	ex.setError(err.Error())
	writeRefusal(w, ex, rf)
}
