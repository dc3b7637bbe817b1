package resolver

import (
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/audit"
)

// record writes the one audit record of the query and counts it.
func (s *Server) record(qr *query, resp *dns.Msg) {
	r := &qr.rec
	r.SetDecision(qr.dec)
	d := &audit.DNS{Rcode: rcodeString(resp.Rcode)}
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
	s.cfg.Metrics.DNSQueries.WithLabelValues(r.Verdict, d.Rcode).Inc()
	s.cfg.Metrics.Requests.WithLabelValues(audit.KindDNS, r.Verdict, r.Reason).Inc()
}
