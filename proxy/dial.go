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

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
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

// admit identifies the client, normalizes the host and decides. On refusal
// ex.dec holds the denial. Order matters: an unknown client is refused
// before its host is even looked at, in every mode; while records cannot be
// written (Config.AuditAvailable) nothing is served.
func (p *Proxy) admit(ex *exchange, rawHost string, port int) *refusal {
	ex.port = port
	host, herr := policy.NormalizeHost(rawHost)
	if herr != nil {
		ex.host = truncate(rawHost, maxHostLen)
	} else {
		ex.host = host
	}
	c := p.identify(ex)
	if c == nil {
		ex.dec = policy.Denied(policy.ReasonUnknownClient)
		return deny(http.StatusForbidden, ex.dec, nil)
	}
	if p.cfg.AuditAvailable != nil && !p.cfg.AuditAvailable() {
		ex.dec = policy.Denied(policy.ReasonAuditUnavailable)
		return deny(http.StatusServiceUnavailable, ex.dec, errAuditUnavailable)
	}
	if herr != nil || host == "" {
		ex.dec = policy.Denied(policy.ReasonInvalidHost)
		return deny(http.StatusBadRequest, ex.dec, herr)
	}
	if port < 1 || port > 65535 {
		ex.dec = policy.Denied(policy.ReasonBadRequest)
		return deny(http.StatusBadRequest, ex.dec, fmt.Errorf("port %d out of range", port))
	}
	// Decide refuses metadata names first, whatever a rule says and in
	// every mode, so they are refused here before any lookup.
	ex.dec = p.cfg.Policy().Decide(policy.DecideArgs{Client: c, Host: host, Port: port, Mode: p.cfg.Mode})
	if !ex.dec.Allowed() {
		return deny(http.StatusForbidden, ex.dec, nil)
	}
	return nil
}

// dialGuarded resolves the admitted host (an IP literal is not looked up),
// puts every candidate address through the guard and dials exactly the
// addresses it permitted, in order, until one connects. There is no second
// resolution between check and dial, so DNS rebinding cannot slip an
// address past the guard.
func (p *Proxy) dialGuarded(ctx context.Context, ex *exchange) (net.Conn, *refusal) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(ex.host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ans, err := p.cfg.Resolver.LookupIP(ctx, ex.host)
		ex.setDNS(ans)
		if errors.Is(err, resolver.ErrMetadataName) {
			// The CNAME chain leads to a metadata name: a denial in every
			// mode, never a resolve failure.
			ex.dec = policy.Denied(policy.ReasonMetadata)
			return nil, deny(http.StatusForbidden, ex.dec, fmt.Errorf("%w: %q: %w", ErrDenied, ex.host, err))
		}
		if err != nil || len(ans.Addrs) == 0 {
			if err == nil {
				err = errors.New("no addresses")
			}
			return nil, ex.upstreamFailure(http.StatusBadGateway, record.OutcomeResolveFailed, fmt.Errorf("%w: %q: %w", ErrResolve, ex.host, err))
		}
		addrs = ans.Addrs
	}

	permitted := make([]netip.AddrPort, 0, len(addrs))
	var refusedDec, softDec policy.Decision
	softened := false
	for _, a := range addrs {
		// Dial the address the guard classifies: without an IPv6 zone
		// (which would pick an interface) and IPv4-mapped as plain IPv4.
		ap := netip.AddrPortFrom(a.WithZone("").Unmap(), uint16(ex.port))
		// Audit mode softens a private-address refusal but never the
		// never class (docs/design.md, "--mode").
		d := p.cfg.Guard.Check(ex.dec, ap)
		if !d.Allowed() {
			if refusedDec.Reason == "" || d.Reason.Never() {
				refusedDec = d
			}
			continue
		}
		if d.WouldDeny && !softened { // keep the first reason enforce would give
			softDec, softened = d, true
		}
		permitted = append(permitted, ap)
	}
	if len(permitted) == 0 {
		ex.dec = refusedDec
		return nil, deny(http.StatusForbidden, refusedDec, fmt.Errorf("%w: every address of %q refused by the guard", ErrDenied, ex.host))
	}
	if softened && !ex.dec.WouldDeny {
		ex.dec = softDec
	}

	var errs []error
	timedOut := false
	for _, ap := range permitted {
		start := time.Now()
		c, err := p.dial(ctx, ap)
		if err == nil {
			p.mc.dialOK.Observe(time.Since(start).Seconds())
			ex.rec.Peer = ap.String()
			return c, nil
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
	if timedOut {
		return nil, ex.upstreamFailure(http.StatusGatewayTimeout, record.OutcomeDialTimeout, fmt.Errorf("%w: %w", ErrDial, errors.Join(errs...)))
	}
	return nil, ex.upstreamFailure(http.StatusBadGateway, record.OutcomeDialFailed, fmt.Errorf("%w: %w", ErrDial, errors.Join(errs...)))
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
