package dnsserver

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// limitListener closes, at accept, a connection from a source IP that holds
// Config.MaxConnsPerClient already: one pod must not hold thousands of
// idle DNS-over-TCP connections (each a descriptor, a goroutine and its
// buffers) and starve every other pod. The refusal is counted in a summary
// record, not one record per connection.
type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := admit.SourceAddr(c.RemoteAddr())
		release := l.s.conns.Acquire(src)
		if release == nil {
			c.Close()
			l.s.refuse(src, overConns)
			continue
		}
		return &limitConn{Conn: c, release: release}, nil
	}
}

// limitConn gives its slot back when closed (release is idempotent).
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// The limits a refusal can be over: both are recorded with reason
// rate-limited (docs/design.md, "Operations"), the error says which.
const (
	overConns = "connections" // a TCP connection over --max-conns-per-client, closed at accept
	overRate  = "queries"     // a query over --dns-rate, answered REFUSED
)

// refuse counts a refusal over a limit: its metrics now, its record in
// the client's summary of this second (recordRefusals).
func (s *Server) refuse(src netip.Addr, over string) {
	s.refused.Add(limit.Key{Src: src, Kind: record.KindDNS, Reason: over})
	c := s.counters.Get(counterKey{verdict: string(policy.Deny), reason: string(policy.ReasonRateLimited), rcode: rcodeOfRefusal(over)})
	c.inc()
}

// rcodeOfRefusal is the rcode counted for a refusal: REFUSED for a query
// over the rate; noQuery for a connection closed at accept, which is no
// query (counted in egressd_requests_total only).
func rcodeOfRefusal(over string) int {
	if over == overRate {
		return dns.RcodeRefused
	}
	return noQuery
}

// recordRefusals writes the summary record of count refusals of one client
// (limit.Summary's Emit): reason rate-limited, outcome refused, the count, and start the first refusal's time.
func (s *Server) recordRefusals(k limit.Key, count int64, first time.Time) {
	rec := record.Record{Kind: record.KindDNS, Start: first, Mode: string(s.cfg.Mode), Count: count, Outcome: record.OutcomeRefused}
	rec.Client = audit.ClientOf(k.Src, s.admit.Identify(k.Src))
	rec.SetDecision(policy.Denied(policy.ReasonRateLimited))
	switch k.Reason {
	case overRate:
		rec.Error = strconv.FormatInt(count, 10) + " queries over " + strconv.FormatFloat(s.cfg.QueryRate, 'f', -1, 64) + "/s answered REFUSED"
	case overConns:
		rec.Error = strconv.FormatInt(count, 10) + " connections over " + strconv.Itoa(s.cfg.MaxConnsPerClient) + " open closed at accept"
	}
	s.cfg.Audit.Write(&rec)
}
