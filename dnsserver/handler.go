package dnsserver

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// handle answers one query from src; nil means send nothing. It is the
// whole per-query flow (doc.go) and the target of FuzzHandler.
func (s *Server) handle(ctx context.Context, src netip.Addr, req *dns.Msg, udp bool) *dns.Msg {
	return s.serveQuery(ctx, &query{}, src, req, udp)
}

// serveQuery is handle with the query state provided by the caller (the
// UDP readers reuse theirs); qr is empty but for detach (query).
func (s *Server) serveQuery(ctx context.Context, qr *query, src netip.Addr, req *dns.Msg, udp bool) *dns.Msg {
	if req == nil || req.Response {
		return nil
	}
	qr.start, qr.src, qr.req, qr.udp = time.Now(), src, req, udp
	qr.rec = record.Record{Kind: record.KindDNS, Start: qr.start, Mode: string(s.cfg.Mode)}
	if len(req.Question) > 0 {
		qr.q = req.Question[0]
		qr.host = strings.TrimSuffix(resolver.LowerASCII(qr.q.Name), ".")
		qr.rec.Host = qr.host
		qr.rec.QType = typeString(qr.q.Qtype)
	}
	if !s.rate.Allow(qr.src) {
		return s.overRate(qr)
	}
	return s.finish(qr, s.answer(ctx, qr))
}

// overRate answers a query over its client's rate, known or not: REFUSED,
// no larger than the query, and counted in the client's summary of this
// second (no record of its own), so that a flood neither costs an
// upstream query nor writes a record per query.
func (s *Server) overRate(qr *query) *dns.Msg {
	qr.dec = policy.Denied(policy.ReasonRateLimited)
	resp := s.bound(qr, s.reply(qr, dns.RcodeRefused))
	if qr.udp {
		noLargerThanQuery(resp, qr.req)
	}
	s.refuse(qr.src, overRate)
	qr.recorded()
	return resp
}

// slow is called before qr may wait on the network: it lets a UDP reader
// hand its socket on (detach), and bounds the wait by QueryTimeout from
// the query's start. What never leaves the process (identity, policy, a
// cache hit, audit) needs neither.
func (s *Server) slow(ctx context.Context, qr *query) (context.Context, context.CancelFunc) {
	qr.detachOnce()
	return context.WithDeadline(ctx, qr.start.Add(s.cfg.QueryTimeout))
}

// answer makes the answer to qr (nil: send nothing); finish bounds and
// records it.
func (s *Server) answer(ctx context.Context, qr *query) *dns.Msg {
	// Identify, audit availability, the name: admit's steps, as for a
	// CONNECT (admit.Request.AnyPort: a question is about any port).
	qr.client = s.admit.Identify(qr.src)
	qr.rec.Client = audit.ClientOf(qr.src, qr.client)
	a := s.admit.Admit(admit.Request{Client: qr.client, Host: qr.host, AnyPort: true})
	qr.dec = a.Decision
	if qr.client == nil {
		// Never an open resolver: a source that is no pod learns nothing
		// (RFC 8914 §4.19 Prohibited).
		qr.setEDE(dns.ExtendedErrorCodeProhibited, "egressd: unknown-client")
		return s.reply(qr, dns.RcodeRefused)
	}
	qr.rec.Probe = probeOf(qr.req)
	if errors.Is(a.Err, admit.ErrAuditUnavailable) {
		// --audit-failure closed: nothing is served that cannot be
		// recorded. REFUSED, not SERVFAIL: the stub should not retry
		// another name of its search list at once.
		qr.setEDE(dns.ExtendedErrorCodeProhibited, "egressd: audit-unavailable")
		return s.reply(qr, dns.RcodeRefused)
	}
	switch {
	case qr.req.Opcode != dns.OpcodeQuery:
		qr.dec = policy.Denied(policy.ReasonBadRequest)
		return s.reply(qr, dns.RcodeNotImplemented)
	case len(qr.req.Question) != 1 || qr.host == "" && qr.q.Name != ".":
		// RFC 9619: exactly one question.
		qr.dec = policy.Denied(policy.ReasonBadRequest)
		return s.reply(qr, dns.RcodeFormatError)
	case qr.q.Qclass != dns.ClassINET:
		// CHAOS (version.bind) and the rest: nothing to tell.
		qr.dec = policy.Denied(policy.ReasonBadRequest)
		return s.reply(qr, dns.RcodeRefused)
	case qr.q.Qtype == dns.TypeAXFR || qr.q.Qtype == dns.TypeIXFR:
		qr.dec = policy.Denied(policy.ReasonBadRequest)
		return s.reply(qr, dns.RcodeRefused)
	}
	if opt := qr.req.IsEdns0(); opt != nil && opt.Version() != 0 {
		// RFC 6891 §6.1.3: unknown EDNS version.
		qr.dec = policy.Denied(policy.ReasonBadRequest)
		return s.reply(qr, dns.RcodeBadVers)
	}

	switch a.DNSAnswer {
	case admit.AnswerCluster:
		return s.forwardCluster(ctx, qr)
	case admit.AnswerSearch:
		// Answered here: the name as asked does not exist for this pod,
		// and NXDOMAIN sends the stub resolver on down its search list.
		return s.reply(qr, dns.RcodeNameError)
	case admit.AnswerUpstream:
		return s.answerFromCache(ctx, qr)
	default:
		return s.blocked(qr)
	}
}

// blocked answers NXDOMAIN with Extended DNS Error 15 (Blocked, RFC 8914
// §4.16) and the reason: NXDOMAIN, not REFUSED, so that stub resolvers keep
// walking their search list (musl stops on REFUSED).
func (s *Server) blocked(qr *query) *dns.Msg {
	qr.setEDE(dns.ExtendedErrorCodeBlocked, "egressd: "+string(qr.dec.Reason))
	return s.reply(qr, dns.RcodeNameError)
}

// answerFromCache answers an allowed name from the shared cache (asking
// the upstreams on a miss).
func (s *Server) answerFromCache(ctx context.Context, qr *query) *dns.Msg {
	switch qr.q.Qtype {
	case dns.TypeANY:
		// RFC 8482 §4.2: answer ANY with one synthesized HINFO instead of
		// everything we know (no amplification).
		resp := s.reply(qr, dns.RcodeSuccess)
		resp.Answer = []dns.RR{&dns.HINFO{
			Hdr: dns.RR_Header{Name: qr.q.Name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: 3600},
			Cpu: "RFC8482",
		}}
		return resp
	}
	if s.cfg.AdvertiseIP.IsValid() {
		switch qr.q.Qtype {
		case dns.TypeA, dns.TypeAAAA:
			return s.transparent(ctx, qr)
		case dns.TypeHTTPS, dns.TypeSVCB:
			// Their ipv4hint/ipv6hint would lead the client past the
			// transparent listeners: answer NODATA, the client falls back
			// to A/AAAA (RFC 9460 §3).
			return s.reply(qr, dns.RcodeSuccess)
		}
	}
	var sv *served
	var ok bool
	qr.hit, sv, ok = s.served.Cached(qr.q.Name, qr.q.Qtype)
	res := &qr.hit
	if !ok {
		// No deadline of our own: the resolver bounds a miss (two tries
		// per upstream). The UDP reader hands its socket on before this
		// query waits (WithBeforeWait), while the upstream works.
		qctx := context.WithoutCancel(ctx)
		if qr.detach != nil {
			qctx = resolver.WithBeforeWait(qctx, qr.detachOnce)
		}
		var err error
		res, err = s.cfg.Resolver.Query(qctx, qr.q.Name, qr.q.Qtype)
		if err != nil {
			return s.upstreamFailed(qr, err)
		}
		sv = servedOf(res.Msg)
	}
	qr.res = res
	switch {
	case sv.metadata:
		// The CNAME chain leads to a cloud metadata name (never asked:
		// resolver.ownedAnswer), whatever the type asked: deny it as the
		// name itself, in every mode.
		qr.dec = qr.dec.Deny(policy.ReasonMetadata)
		return s.blocked(qr)
	case sv.never != "" && !hasAddress(sv.answer) && (qr.q.Qtype == dns.TypeA || qr.q.Qtype == dns.TypeAAAA):
		// Every address of the name is in the guard's never class
		// (metadata, link-local, ...): deny the name, in every mode.
		qr.dec = qr.dec.Deny(sv.never)
		return s.blocked(qr)
	}
	qr.sv = sv
	resp := s.reply(qr, res.Msg.Rcode)
	resp.Answer, resp.Ns = sv.answer, sv.ns
	return resp
}

// transparent answers A (AAAA) of an allowed name with the advertised
// address, once the name is known to have an address upstream.
func (s *Server) transparent(ctx context.Context, qr *query) *dns.Msg {
	ctx, cancel := s.slow(ctx, qr)
	defer cancel()
	ans, err := s.cfg.Resolver.LookupIP(ctx, qr.q.Name)
	qr.res = &resolver.Result{Cached: ans.Cached, Stale: ans.Stale, Upstream: ans.Upstream, Duration: ans.Duration}
	switch {
	case errors.Is(err, resolver.ErrMetadataName):
		qr.dec = qr.dec.Deny(policy.ReasonMetadata)
		return s.blocked(qr)
	case errors.Is(err, resolver.ErrNXDomain):
		return s.reply(qr, dns.RcodeNameError)
	case errors.Is(err, resolver.ErrNoAddress):
		return s.reply(qr, dns.RcodeSuccess)
	case err != nil:
		return s.upstreamFailed(qr, err)
	}
	if r := admit.AllNever(ans.Addrs); r != "" {
		qr.dec = qr.dec.Deny(r)
		return s.blocked(qr)
	}
	ttl := min(ans.TTL, uint32(s.cfg.AdvertiseTTL/time.Second))
	resp := s.reply(qr, dns.RcodeSuccess)
	hdr := dns.RR_Header{Name: qr.q.Name, Class: dns.ClassINET, Ttl: ttl}
	switch {
	case qr.q.Qtype == dns.TypeA:
		hdr.Rrtype = dns.TypeA
		resp.Answer = []dns.RR{&dns.A{Hdr: hdr, A: s.cfg.AdvertiseIP.AsSlice()}}
	case s.cfg.AdvertiseIP6.IsValid():
		hdr.Rrtype = dns.TypeAAAA
		resp.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: s.cfg.AdvertiseIP6.AsSlice()}}
	}
	return resp
}

// upstreamFailed answers SERVFAIL: the name was allowed, but nobody could
// say what it is (RFC 8914 §4.23 Network Error). The decision stays the
// policy's; the record's outcome says resolve-failed.
func (s *Server) upstreamFailed(qr *query, err error) *dns.Msg {
	qr.err = err
	qr.setEDE(dns.ExtendedErrorCodeNetworkError, "egressd: upstream failed")
	return s.reply(qr, dns.RcodeServerFailure)
}

// forwardCluster passes a cluster-domain or reverse-zone query to the
// cluster DNS, uncached: those answers change with every pod and service.
func (s *Server) forwardCluster(ctx context.Context, qr *query) *dns.Msg {
	if s.cluster == nil {
		return s.reply(qr, dns.RcodeNameError)
	}
	ctx, cancel := s.slow(ctx, qr)
	defer cancel()
	start := time.Now()
	resp, addr, err := s.cluster.Exchange(ctx, dns.Fqdn(resolver.LowerASCII(qr.q.Name)), qr.q.Qtype, qr.q.Qclass)
	if err != nil {
		return s.upstreamFailed(qr, err)
	}
	qr.res = &resolver.Result{Msg: resp, Upstream: addr, Duration: time.Since(start)}
	// The cluster DNS is not trusted with never-class addresses or
	// metadata names either: anyone who may create a headless Service's
	// endpoints (or an ExternalName Service) can point a cluster name at
	// 169.254.169.254 or metadata.google.internal. Its answer is filtered
	// by owner like any upstream's (resolver.Client).
	sv := servedOf(resp)
	if sv.metadata {
		qr.dec = qr.dec.Deny(policy.ReasonMetadata)
		return s.blocked(qr)
	}
	out := s.reply(qr, resp.Rcode)
	out.Answer, out.Ns = sv.answer, sv.ns
	return out
}

// reply starts the answer to qr with rcode: the question echoed, RA set,
// and an OPT record when the client sent one (RFC 6891 §7: never
// otherwise), carrying qr.ede.
func (s *Server) reply(qr *query, rcode int) *dns.Msg {
	resp := &qr.msg
	*resp = dns.Msg{}
	resp.Id = qr.req.Id
	resp.Response = true
	resp.Opcode = qr.req.Opcode
	resp.RecursionDesired = qr.req.RecursionDesired
	resp.CheckingDisabled = qr.req.CheckingDisabled
	resp.RecursionAvailable = qr.client != nil
	if len(qr.req.Question) == 1 {
		qr.qs[0] = qr.req.Question[0]
		resp.Question = qr.qs[:]
	}
	resp.Rcode = rcode
	return resp
}

// finish bounds the answer and writes its audit record, or leaves the
// record for after the answer was sent (query.answered).
func (s *Server) finish(qr *query, resp *dns.Msg) *dns.Msg {
	resp = s.bound(qr, resp)
	if qr.udp && qr.client == nil {
		noLargerThanQuery(resp, qr.req)
	}
	if qr.answered(resp) {
		s.record(qr, resp)
		qr.recorded()
	}
	return resp
}

// bound adds EDNS to the answer and bounds its size.
func (s *Server) bound(qr *query, resp *dns.Msg) *dns.Msg {
	size := dns.MaxMsgSize
	if opt := qr.req.IsEdns0(); opt != nil {
		o := &qr.opt
		*o = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(s.cfg.UDPSize)
		if qr.ede != nil {
			o.Option = append(qr.options[:0], qr.ede)
		}
		if resp.Extra == nil {
			resp.Extra = qr.extra[:0]
		}
		resp.Extra = append(resp.Extra, o)
		if qr.udp {
			size = max(dns.MinMsgSize, min(int(opt.UDPSize()), int(s.cfg.UDPSize)))
		}
	} else if qr.udp {
		size = dns.MinMsgSize
	}
	if resp.Rcode > 0xF && qr.req.IsEdns0() == nil {
		resp.Rcode = dns.RcodeFormatError
	}
	// RFC 1035 §4.2.1 / RFC 6891 §7: bounded answers; TC sends the client
	// to TCP. This is also what keeps us from being an amplifier.
	resp.Truncate(size)
	return resp
}

// recordNow writes the record of a query whose answer was sent first
// (query.answered); it does nothing for any other.
func (s *Server) recordNow(qr *query) {
	if resp := qr.unrecorded(); resp != nil {
		s.record(qr, resp)
		qr.recorded()
	}
}

// noLargerThanQuery shrinks an answer to a source that is no pod, or that
// is over its rate, until it is no larger than its query: over UDP that
// source may be spoofed, and a REFUSED that grew by its EDE text would
// make egressd a (small) amplifier towards the victim. It drops, in order,
// the EDE text, the EDE, the OPT record and the question.
func noLargerThanQuery(resp, req *dns.Msg) {
	limit := req.Len()
	for step := 0; resp.Len() > limit && step < 4; step++ {
		switch step {
		case 0, 1:
			opt := resp.IsEdns0()
			if opt == nil {
				continue
			}
			for i, o := range opt.Option {
				if e, ok := o.(*dns.EDNS0_EDE); ok {
					if step == 0 {
						opt.Option[i] = &dns.EDNS0_EDE{InfoCode: e.InfoCode}
					} else {
						opt.Option = append(opt.Option[:i], opt.Option[i+1:]...)
					}
					break
				}
			}
		case 2:
			resp.Extra = nil
		case 3:
			resp.Question = nil
		}
	}
}

func typeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}
