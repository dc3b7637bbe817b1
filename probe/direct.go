package probe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// direct opens a plain TCP connection to the target, without the proxy,
// and closes it. It must fail: a NetworkPolicy that makes egressd the only
// way out drops it (a timeout) or rejects it. A name is resolved first and
// a failed resolution is no proof of anything, so it is an error, not a
// pass; the address resolved is the one dialled.
func (r *Runner) direct(ctx context.Context, c Check) Result {
	res := Result{Target: net.JoinHostPort(c.Host, strconv.Itoa(c.Port))}
	addr, ok := parseIP(c.Host)
	if !ok {
		addrs, err := r.cfg.Resolver.LookupNetIP(ctx, "ip", c.Host)
		if err != nil || len(addrs) == 0 {
			res.Observed, res.Detail = NoDecision, "resolve "+c.Host+": "+errText(ctx, errOr(err, "no address"))
			return res
		}
		addr = addrs[0].Unmap()
	}
	dst := netip.AddrPortFrom(addr, uint16(c.Port)).String()
	conn, err := r.dialer("tcp").DialContext(ctx, "tcp", dst)
	if err == nil {
		conn.Close()
		res.Observed, res.Status, res.Detail = Connected, "connected", "connected to "+dst
		return res
	}
	res.Observed = Blocked
	switch {
	case ctx.Err() != nil || isTimeout(err):
		res.Status, res.Detail = "timed out", "dropped: no answer from "+dst
	case errors.Is(err, syscall.ECONNREFUSED):
		// A reset comes from the target or from a NetworkPolicy that
		// rejects rather than drops; either way nothing got through.
		res.Status, res.Detail = "connection refused", "refused: "+dst
	default:
		res.Status, res.Detail = "unreachable", err.Error()
	}
	return res
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func errOr(err error, text string) error {
	if err != nil {
		return err
	}
	return errors.New(text)
}
