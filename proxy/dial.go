package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// refusal is why a request gets no connection: a denial (403) or an upstream
// failure (502/504), with the reason that goes in the header and record.
type refusal struct {
	status int
	reason policy.Reason
	err    error
}

func (r *refusal) Error() string {
	if r.err != nil {
		return fmt.Sprintf("%s: %v", r.reason, r.err)
	}
	return string(r.reason)
}

func (r *refusal) Unwrap() error { return r.err }

// maxHostLen bounds a host as it is recorded when it failed normalization.
const maxHostLen = 253

// admit identifies the client, normalizes the host and decides. On refusal
// ex.dec holds the denial. Order matters: an unknown client is refused
// before its host is even looked at, in every mode.
func (p *Proxy) admit(ex *exchange, rawHost string, port int) *refusal {
	ex.port = port
	host, herr := policy.NormalizeHost(rawHost)
	if herr != nil {
		ex.host = truncate(rawHost, maxHostLen)
	} else {
		ex.host = host
	}
	c, ok := p.cfg.Identity.Lookup(ex.src)
	if !ok {
		ex.dec = policy.Denied(policy.ReasonUnknownClient)
		return &refusal{status: http.StatusForbidden, reason: policy.ReasonUnknownClient}
	}
	ex.client = c
	ex.rec.Client = audit.ClientOf(ex.src, c)
	if herr != nil || host == "" {
		ex.dec = policy.Denied(policy.ReasonInvalidHost)
		return &refusal{status: http.StatusBadRequest, reason: policy.ReasonInvalidHost, err: herr}
	}
	if port < 1 || port > 65535 {
		ex.dec = policy.Denied(policy.ReasonBadRequest)
		return &refusal{status: http.StatusBadRequest, reason: policy.ReasonBadRequest, err: fmt.Errorf("port %d out of range", port)}
	}
	// Decide refuses metadata names first, whatever a rule says and in
	// every mode, so they are refused here before any lookup.
	ex.dec = p.cfg.Policy().Decide(policy.DecideArgs{Client: c, Host: host, Port: port, Mode: p.cfg.Mode})
	if !ex.dec.Allowed() {
		return &refusal{status: http.StatusForbidden, reason: ex.dec.Reason}
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
		if err != nil || len(ans.Addrs) == 0 {
			if err == nil {
				err = errors.New("no addresses")
			}
			return nil, p.fail(ex, http.StatusBadGateway, policy.ReasonResolveFailed, fmt.Errorf("%w: %q: %w", ErrResolve, ex.host, err))
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
		// never class (DESIGN.md, "--mode").
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
		return nil, &refusal{status: http.StatusForbidden, reason: refusedDec.Reason,
			err: fmt.Errorf("%w: every address of %q refused by the guard", ErrDenied, ex.host)}
	}
	if softened && !ex.dec.WouldDeny {
		ex.dec = softDec
	}

	var errs []error
	timedOut := false
	for _, ap := range permitted {
		start := time.Now()
		c, err := p.dial(ctx, "tcp", ap.String())
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
	status := http.StatusBadGateway
	if timedOut {
		status = http.StatusGatewayTimeout
	}
	return nil, p.fail(ex, status, policy.ReasonDialFailed, fmt.Errorf("%w: %w", ErrDial, errors.Join(errs...)))
}

// fail records an upstream failure: the verdict of the decision stays (the
// policy allowed the request), the reason says why it went nowhere.
func (p *Proxy) fail(ex *exchange, status int, reason policy.Reason, err error) *refusal {
	ex.dec.Reason = reason
	return &refusal{status: status, reason: reason, err: err}
}

// writeRefusal answers a refused request: the status, X-Egressd-Reason and a
// one-line body naming host, pod and reason. Never 407: a policy denial is
// not an authentication problem, and clients would retry with credentials.
func writeRefusal(w http.ResponseWriter, ex *exchange, rf *refusal) {
	h := w.Header()
	h.Set("X-Egressd-Reason", string(rf.reason))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	verb := "denied"
	if rf.status >= 500 {
		verb = "failed"
	}
	w.WriteHeader(rf.status)
	fmt.Fprintf(w, "egressd: %s %s for %s: %s\n", verb, net.JoinHostPort(ex.host, fmt.Sprint(ex.port)), ex.who(), rf.reason)
	ex.rec.HTTP = httpOf(ex.rec.HTTP, rf.status)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
