package resolver

import (
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// record writes the one audit record of the query and counts it.
func (s *Server) record(qr *query, resp *dns.Msg) {
	r := &qr.rec
	r.SetDecision(qr.dec)
	d := &qr.dnsRec
	*d = audit.DNS{Rcode: rcodeString(resp.Rcode), Answers: qr.answers[:0]}
	for _, rr := range resp.Answer {
		switch v := rr.(type) {
		case *dns.CNAME:
			d.CNAMEs = append(d.CNAMEs, strings.TrimSuffix(v.Target, "."))
		case *dns.A:
			d.Answers = append(d.Answers, v.A.String())
		case *dns.AAAA:
			d.Answers = append(d.Answers, v.AAAA.String())
		default:
			d.Answers = append(d.Answers, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	}
	if len(resp.Answer) > 0 {
		d.TTL = minTTL(resp.Answer)
	} else if len(resp.Ns) > 0 {
		d.TTL = minTTL(resp.Ns)
	}
	if qr.res != nil {
		d.Cached, d.Stale, d.Upstream = qr.res.Cached, qr.res.Stale, qr.res.Upstream
	}
	elapsed := time.Since(qr.start)
	d.MS = float64(elapsed.Microseconds()) / 1000
	r.DNS = d
	r.DurationMS = d.MS
	if qr.err != nil {
		r.Error = qr.err.Error()
	}
	s.cfg.Audit.Write(r)
	s.countersFor(r.Verdict, r.Reason, resp.Rcode, d.Rcode).inc()
}

// recordMalformed writes the audit record of a UDP datagram that did not
// parse, answered resp (FORMERR): reason bad-request, no host, the client
// as identified.
func (s *Server) recordMalformed(qr *query, src netip.Addr, resp *dns.Msg) {
	qr.start, qr.src, qr.udp = time.Now(), src, true
	qr.rec = audit.Record{Kind: audit.KindDNS, Mode: string(s.cfg.Mode)}
	if c, ok := s.cfg.Identity.Lookup(src); ok {
		qr.client = c
	}
	qr.rec.Client = audit.ClientOf(src, qr.client)
	qr.dec = policy.Denied(policy.ReasonBadRequest)
	s.record(qr, resp)
}

// counterKey is what the query counters' labels are made of.
type counterKey struct {
	verdict, reason string
	rcode           int
}

// counters are the two counters one query increments, looked up once per
// label set and kept (Server.counters): the label values come from small
// fixed sets (verdicts, reasons, rcodes), and the vectors' own lookup
// hashes every label value of every query.
type counters struct {
	queries, requests prometheus.Counter
}

func (c counters) inc() {
	c.queries.Inc()
	c.requests.Inc()
}

func (s *Server) countersFor(verdict, reason string, rcode int, rcodeText string) counters {
	k := counterKey{verdict: verdict, reason: reason, rcode: rcode}
	if c, ok := s.counters.Load(k); ok {
		return c.(counters)
	}
	c := counters{
		queries:  s.cfg.Metrics.DNSQueries.WithLabelValues(verdict, rcodeText),
		requests: s.cfg.Metrics.Requests.WithLabelValues(audit.KindDNS, verdict, reason),
	}
	s.counters.Store(k, c)
	return c
}
