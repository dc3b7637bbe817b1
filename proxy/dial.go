package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// dialResult is what the route and dial steps of one request leave for its
// exchange: the route (decision, lookup, addresses), the dialled peer and,
// when nothing connected, the refusal (a failure's outcome in it). A
// value, so that a dial that outlives its request (forward.go) touches no
// exchange.
type dialResult struct {
	route admit.Route
	peer  netip.AddrPort
	rf    *refusal
}

// routeAndDial runs the pipeline's Route for a request admitted with d
// (the lookup, once, and policy.Guard.CheckAll over every address) and
// dials exactly the addresses it permitted, in order, until one connects.
func (p *Proxy) routeAndDial(ctx context.Context, d policy.Decision, host string, port int) (net.Conn, dialResult) {
	h := dialResult{route: p.adm.Route(ctx, d, host, port)}
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
		h.rf = failure(http.StatusBadGateway, record.OutcomeResolveFailed, fmt.Errorf("%w: %q: %w", ErrResolve, host, r.Err))
		return nil, h
	}
	c, peer, timedOut, err := p.dialAddrs(ctx, r.Addrs)
	switch {
	case err == nil:
		h.peer = peer
		return c, h
	case timedOut:
		h.rf = failure(http.StatusGatewayTimeout, record.OutcomeDialTimeout, err)
	default:
		h.rf = failure(http.StatusBadGateway, record.OutcomeDialFailed, err)
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

// dialGuarded is routeAndDial for the exchange's own goroutine (CONNECT,
// SNI): what it found goes straight into the exchange. A failure once the
// drain deadline passed is the drain's (outcome drained; its answer still
// names the failure).
func (p *Proxy) dialGuarded(ctx context.Context, ex *exchange) (net.Conn, *refusal) {
	c, h := p.routeAndDial(ctx, ex.decision(), ex.host, ex.port)
	ex.mu.Lock()
	ex.applyLocked(&h)
	ex.mu.Unlock()
	if rf := h.rf; rf != nil && rf.after != "" && p.cutCtx.Err() != nil {
		rf.after = record.OutcomeDrained
	}
	return c, h.rf
}
