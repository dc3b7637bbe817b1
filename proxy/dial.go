package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// refusal is why a request gets no connection: a denial (403, 400, 503)
// or an upstream failure (502/504). reason is what X-Egressd-Reason says:
// the decision's reason for a denial, the outcome for an upstream failure
// (resolve-failed, dial-failed, dial-timeout, upstream-error); the record's
// reason is always the decision's.
type refusal struct {
	status int
	reason string
	err    error
}

// deny is the refusal of a denied decision.
func deny(status int, d policy.Decision, err error) *refusal {
	return &refusal{status: status, reason: string(d.Reason), err: err}
}

// upstreamFailure records what went wrong after an allowed decision in the
// exchange's outcome (the decision stays as it is) and returns its refusal.
func (ex *exchange) upstreamFailure(status int, outcome string, err error) *refusal {
	ex.outcome = outcome
	return failure(status, outcome, err)
}

// failure is the refusal of an upstream failure: X-Egressd-Reason names
// the outcome.
func failure(status int, outcome string, err error) *refusal {
	return &refusal{status: status, reason: outcome, err: err}
}

func (r *refusal) Error() string {
	if r.err != nil {
		return fmt.Sprintf("%s: %v", r.reason, r.err)
	}
	return r.reason
}

func (r *refusal) Unwrap() error { return r.err }

// maxHostLen bounds a host as it is recorded when it failed normalization.
const maxHostLen = 253

// admit is the admission step of every listener: identify, then the
// pipeline's Admit (audit availability, NormalizeHost, the port, Decide;
// admit.Pipeline.Admit has the order). The exchange keeps the host and the
// decision; a denial comes back as its refusal.
func (p *Proxy) admit(ex *exchange, rawHost string, port int) *refusal {
	ex.port = port
	a := p.adm.Admit(admit.Request{Client: p.identify(ex), Host: rawHost, Port: port})
	ex.host = a.Host
	d := ex.decide(a.Decision)
	if d.Allowed() {
		return nil
	}
	return deny(refusalStatus(d.Reason), d, a.Err)
}

// refusalStatus is the HTTP status of a denial: 503 while records cannot
// be written, 400 for a request that names no valid destination, 403 for
// a policy or guard denial (never 407: see writeRefusal).
func refusalStatus(r policy.Reason) int {
	switch r {
	case policy.ReasonAuditUnavailable:
		return http.StatusServiceUnavailable
	case policy.ReasonInvalidHost, policy.ReasonBadRequest:
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}

// hop is what the route and dial steps of one request leave for its
// exchange: the route (decision, lookup, addresses), the dialled peer and,
// when nothing connected, the outcome and the refusal. A value, so that a
// dial that outlives its request (forward.go) touches no exchange.
type hop struct {
	route   admit.Route
	peer    netip.AddrPort
	outcome string
	rf      *refusal
}

// connect runs the pipeline's Route for a request admitted with d (the
// lookup, once, and policy.Guard.CheckAll over every address) and dials
// exactly the addresses it permitted, in order, until one connects.
func (p *Proxy) connect(ctx context.Context, d policy.Decision, host string, port int) (net.Conn, hop) {
	h := hop{route: p.adm.Route(ctx, d, host, port)}
	r := &h.route
	switch {
	case !r.Decision.Allowed():
		why := r.Err // a CNAME to a metadata name
		if why == nil {
			why = admit.ErrRefused
		}
		h.rf = deny(http.StatusForbidden, r.Decision, fmt.Errorf("%w: %q: %w", ErrDenied, host, why))
		return nil, h
	case r.Err != nil:
		h.outcome = audit.OutcomeResolveFailed
		h.rf = failure(http.StatusBadGateway, h.outcome, fmt.Errorf("%w: %q: %w", ErrResolve, host, r.Err))
		return nil, h
	}
	c, peer, timedOut, err := p.dialAddrs(ctx, r.Addrs)
	switch {
	case err == nil:
		h.peer = peer
		return c, h
	case timedOut:
		h.outcome = audit.OutcomeDialTimeout
		h.rf = failure(http.StatusGatewayTimeout, h.outcome, err)
	default:
		h.outcome = audit.OutcomeDialFailed
		h.rf = failure(http.StatusBadGateway, h.outcome, err)
	}
	return nil, h
}

// dialAddrs is the dial step: exactly the addresses the guard permitted,
// in order, falling through on failure; no second resolution. timedOut
// says whether a connect timed out (504 rather than 502).
func (p *Proxy) dialAddrs(ctx context.Context, addrs []netip.AddrPort) (c net.Conn, peer netip.AddrPort, timedOut bool, err error) {
	var errs []error
	for _, ap := range addrs {
		start := time.Now()
		c, err := p.dial(ctx, ap)
		if err == nil {
			p.mc.dialOK.Observe(time.Since(start).Seconds())
			return c, ap, false, nil
		}
		p.mc.dialErr.Observe(time.Since(start).Seconds())
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			timedOut = true
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, timedOut, fmt.Errorf("%w: %w", ErrDial, errors.Join(errs...))
}

// dialGuarded is connect for the exchange's own goroutine (CONNECT, SNI):
// what the hop found goes straight into the exchange.
func (p *Proxy) dialGuarded(ctx context.Context, ex *exchange) (net.Conn, *refusal) {
	c, h := p.connect(ctx, ex.decision(), ex.host, ex.port)
	ex.mu.Lock()
	ex.applyLocked(&h)
	ex.mu.Unlock()
	return c, h.rf
}

// writeRefusal answers a refused request: the status, X-Egressd-Reason and a
// one-line body naming host, pod and reason. Never 407: a policy denial is
// not an authentication problem, and clients would retry with credentials.
func writeRefusal(w http.ResponseWriter, ex *exchange, rf *refusal) {
	body := refusalBody(ex, rf)
	h := w.Header()
	h.Set("X-Egressd-Reason", rf.reason)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rf.status)
	_, _ = io.WriteString(w, body)
	ex.setStatus(rf.status)
}

// refusalBody is the one-line body of a refusal.
func refusalBody(ex *exchange, rf *refusal) string {
	verb := "denied"
	if rf.status >= 500 {
		verb = "failed"
	}
	return "egressd: " + verb + " " + net.JoinHostPort(ex.host, strconv.Itoa(ex.port)) + " for " + ex.who() + ": " + rf.reason + "\n"
}

// appendRefusal appends a whole refusal response (for connections that
// close after it: CONNECT, refused heads, connections over the limit).
func appendRefusal(b []byte, ex *exchange, rf *refusal) []byte {
	body := refusalBody(ex, rf)
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(rf.status), 10)
	b = append(b, ' ')
	b = append(b, statusText(rf.status)...)
	b = append(b, "\r\nX-Egressd-Reason: "...)
	b = append(b, rf.reason...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	ex.setStatus(rf.status)
	return b
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
