package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/metrics"
)

// upstreams is the client side: a list of recursive resolvers with
// failover, UDP first and TCP when the answer comes back truncated.
type upstreams struct {
	addrs     []string
	timeout   time.Duration
	udpSize   uint16
	udp, tcp  *dns.Client
	preferred atomic.Int32 // index of the last upstream that answered
	metrics   *metrics.Metrics
	log       *slog.Logger
}

func newUpstreams(addrs []string, timeout time.Duration, udpSize uint16, m *metrics.Metrics, log *slog.Logger) (*upstreams, error) {
	u := &upstreams{timeout: timeout, udpSize: udpSize, metrics: m, log: log}
	for _, a := range addrs {
		n, err := normalizeUpstream(a)
		if err != nil {
			return nil, err
		}
		u.addrs = append(u.addrs, n)
	}
	if len(u.addrs) == 0 {
		return nil, errors.New("resolver: no upstream DNS server")
	}
	u.udp = &dns.Client{Net: "udp", UDPSize: udpSize, Timeout: timeout}
	u.tcp = &dns.Client{Net: "tcp", Timeout: timeout}
	return u, nil
}

// newQuery builds the message sent upstream for (name, qtype): recursion
// desired, EDNS0 with our buffer size and nothing of the client's options
// (no client subnet, no cookies: the upstream learns nothing about pods).
func newQuery(name string, qtype, qclass uint16, udpSize uint16) *dns.Msg {
	m := new(dns.Msg)
	m.Id = dns.Id()
	m.RecursionDesired = true
	m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}
	m.SetEdns0(udpSize, false)
	return m
}

// exchange asks each upstream in turn, starting with the one that answered
// last, until one gives a usable answer: NOERROR or NXDOMAIN. SERVFAIL,
// REFUSED and the rest count as failures and move on (RFC 8767 treats them
// as "no answer" for serve-stale too).
func (u *upstreams) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	n := len(u.addrs)
	start := int(u.preferred.Load())
	var errs []error
	for i := 0; i < n; i++ {
		idx := (start + i) % n
		addr := u.addrs[idx]
		t0 := time.Now()
		resp, err := u.exchangeOne(ctx, addr, q)
		if err == nil && resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
			err = fmt.Errorf("%s: rcode %s", addr, rcodeString(resp.Rcode))
			u.metrics.UpstreamErrors.WithLabelValues("servfail").Inc()
		} else if err != nil {
			u.metrics.UpstreamErrors.WithLabelValues(errorKind(err)).Inc()
			err = fmt.Errorf("%s: %w", addr, err)
		}
		if err == nil {
			u.metrics.DNSSeconds.WithLabelValues("ok").Observe(time.Since(t0).Seconds())
			if idx != start {
				u.preferred.Store(int32(idx))
			}
			return resp, addr, nil
		}
		u.metrics.DNSSeconds.WithLabelValues("error").Observe(time.Since(t0).Seconds())
		u.log.Debug("dns upstream failed", "upstream", addr, "name", q.Question[0].Name, "error", err)
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", fmt.Errorf("%w: %w", ErrUpstream, errors.Join(errs...))
}

// exchangeOne does one UDP exchange, and a TCP one when the answer is
// truncated (RFC 7766 §5: TC means retry over TCP).
func (u *upstreams) exchangeOne(ctx context.Context, addr string, q *dns.Msg) (*dns.Msg, error) {
	resp, err := u.try(ctx, u.udp, addr, q)
	if err != nil {
		return nil, err
	}
	if resp.Truncated {
		resp, err = u.try(ctx, u.tcp, addr, q)
		if err != nil {
			return nil, fmt.Errorf("tcp after truncation: %w", err)
		}
	}
	if err := checkResponse(q, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (u *upstreams) try(ctx context.Context, c *dns.Client, addr string, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	resp, _, err := c.ExchangeContext(ctx, q, addr)
	return resp, err
}

// checkResponse rejects an answer to a different question: the ID is
// checked by the client, the question here (RFC 5452 §9.1).
func checkResponse(q, resp *dns.Msg) error {
	if !resp.Response {
		return errors.New("answer without QR bit")
	}
	if len(resp.Question) != 1 {
		// Some servers omit the question on errors; only accept that on
		// rcodes that carry no data.
		if resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError {
			return errors.New("answer without question")
		}
		return nil
	}
	a, b := resp.Question[0], q.Question[0]
	if a.Qtype != b.Qtype || a.Qclass != b.Qclass || !strings.EqualFold(a.Name, b.Name) {
		return fmt.Errorf("answer to another question %s", a.String())
	}
	return nil
}

func errorKind(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "timeout"
	}
	return "network"
}
