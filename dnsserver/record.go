package dnsserver

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// record writes the one audit record of the query and counts it. verdict
// and reason are the decision's; outcome says what became of the query:
// refused (denied), resolve-failed (allowed, the upstreams failed and no
// stale answer was left), ok (answered, NXDOMAIN included).
func (s *Server) record(qr *query, resp *dns.Msg) {
	r := &qr.rec
	r.SetDecision(qr.dec)
	after := ""
	if qr.err != nil {
		after = record.OutcomeResolveFailed
	}
	r.Outcome = record.OutcomeOf(qr.dec, after)
	d := &qr.dnsRec
	*d = record.DNS{Rcode: resolver.RcodeString(resp.Rcode)}
	if sv := qr.sv; sv != nil && len(resp.Answer) == len(sv.answer) {
		// The answer as served, whole: its texts were made with it.
		d.Answers, d.CNAMEs = sv.answers, sv.cnames
	} else {
		d.Answers, d.CNAMEs = answerTexts(resp.Answer, qr.answers[:0])
	}
	if len(resp.Answer) > 0 {
		d.TTL = resolver.MinTTL(resp.Answer)
	} else if len(resp.Ns) > 0 {
		d.TTL = resolver.MinTTL(resp.Ns)
	}
	if qr.res != nil {
		d.Cached, d.Stale, d.Upstream = qr.res.Cached, qr.res.Stale, qr.res.Upstream
	}
	if r.Time.IsZero() { // set by finish when the record waits for the send
		r.Time = time.Now() // here, not in Write: one clock read for both
	}
	d.MS = float64(r.Time.Sub(qr.start).Microseconds()) / 1000
	r.DNS = d
	r.DurationMS = d.MS
	if qr.err != nil {
		r.Error = qr.err.Error()
	}
	s.cfg.Audit.Write(r)
	s.counters.Get(counterKey{verdict: r.Verdict, reason: r.Reason, rcode: resp.Rcode, probe: r.Probe != ""}).inc()
}

// recordMalformed writes the audit record of a UDP datagram that did not
// parse, answered resp (FORMERR): reason bad-request, no host, the client
// as identified.
func (s *Server) recordMalformed(qr *query, src netip.Addr, resp *dns.Msg) {
	qr.start, qr.src, qr.udp = time.Now(), src, true
	qr.rec = record.Record{Kind: record.KindDNS, Start: qr.start, Mode: string(s.cfg.Mode)}
	qr.client = s.admit.Identify(src)
	qr.rec.Client = audit.ClientOf(src, qr.client)
	qr.dec = policy.Denied(policy.ReasonBadRequest)
	s.record(qr, resp)
}

// counterKey is what the query counters' labels are made of.
type counterKey struct {
	verdict, reason string
	rcode           int  // noQuery: a refusal that was no query
	probe           bool // a query of egressd probe (EDNS0 option 65431)
}

// noQuery is the rcode of a counterKey for a refusal that is no query (a
// TCP connection closed at accept): egressd_requests_total only.
const noQuery = -1

// counters are the two counters one query increments, looked up once per
// label set (metrics.Children): the label values come from small fixed
// sets (verdicts, reasons, rcodes).
type counters struct {
	queries, requests prometheus.Counter // queries nil for noQuery
}

func (c counters) inc() {
	if c.queries != nil {
		c.queries.Inc()
	}
	c.requests.Inc()
}

func newCounters(m *metrics.Metrics) *metrics.Children[counterKey, counters] {
	return metrics.NewChildren(func(k counterKey) counters {
		c := counters{requests: m.Requests.WithLabelValues(record.KindDNS, k.verdict, k.reason, strconv.FormatBool(k.probe))}
		if k.rcode != noQuery {
			c.queries = m.DNSQueries.WithLabelValues(k.verdict, resolver.RcodeString(k.rcode))
		}
		return c
	})
}
