package probe

import (
	"context"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// ednsBufSize is the UDP payload size offered (DNS Flag Day 2020).
const ednsBufSize = 1232

// edeTextPrefix starts egressd's Extended DNS Error text: "egressd: <reason>".
const edeTextPrefix = "egressd: "

// query asks egressd's resolver for the host's A records, with the probe's
// name in the EDNS0 local option, over UDP and again over TCP when the
// answer is truncated (RFC 7766).
func (r *Runner) query(ctx context.Context, c Check) Result {
	res := Result{Target: c.Host}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(c.Host), dns.TypeA)
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(ednsBufSize)
	// The OPT record is also what lets egressd answer with an EDE at all.
	opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: EDNSOptionCode, Data: []byte(c.Name)})
	m.Extra = append(m.Extra, opt)

	var (
		in  *dns.Msg
		err error
	)
	for _, netw := range []string{"udp", "tcp"} {
		cl := &dns.Client{Net: netw, Dialer: r.dialer(netw), Timeout: r.cfg.Timeout}
		in, _, err = cl.ExchangeContext(ctx, m, r.cfg.DNS)
		if err != nil || !in.Truncated {
			break
		}
	}
	if err != nil {
		res.Observed, res.Detail = NoDecision, fmt.Sprintf("resolver %s: %s", r.cfg.DNS, errText(ctx, err))
		return res
	}
	classifyDNS(&res, in)
	return res
}

// classifyDNS maps an answer to an observation (docs/design.md, "Resolver":
// a denied name is NXDOMAIN with EDE 15, Blocked, RFC 8914 §4.16; an
// unknown client REFUSED with EDE 18, Prohibited).
func classifyDNS(res *Result, in *dns.Msg) {
	res.Status = dns.RcodeToString[in.Rcode]
	if res.Status == "" {
		res.Status = fmt.Sprintf("RCODE%d", in.Rcode)
	}
	var ede *dns.EDNS0_EDE
	if opt := in.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				ede = e
				break
			}
		}
	}
	if ede != nil {
		res.Detail = fmt.Sprintf("EDE %d %s", ede.InfoCode, ede.ExtraText)
		if reason, ok := strings.CutPrefix(ede.ExtraText, edeTextPrefix); ok {
			res.Reason = reason
		}
	}
	blocked := ede != nil && res.Reason != ""
	switch {
	case in.Rcode == dns.RcodeSuccess:
		res.Observed = Allowed
		res.Detail = fmt.Sprintf("%d answers", countA(in))
	case in.Rcode == dns.RcodeNameError && blocked && ede.InfoCode == dns.ExtendedErrorCodeBlocked,
		in.Rcode == dns.RcodeRefused && blocked && ede.InfoCode == dns.ExtendedErrorCodeProhibited:
		res.Observed = Denied
	case in.Rcode == dns.RcodeNameError:
		// egressd forwarded the name and the upstream said it does not
		// exist: the policy allowed it.
		res.Observed = UpstreamFailed
		res.Detail = strings.TrimSpace("NXDOMAIN from upstream " + res.Detail)
	case in.Rcode == dns.RcodeServerFailure:
		res.Observed = UpstreamFailed
		res.Detail = strings.TrimSpace("SERVFAIL " + res.Detail)
	default:
		res.Observed = NoDecision
		res.Detail = strings.TrimSpace(res.Status + " " + res.Detail + ": not an answer egressd gives for a decision")
	}
	if res.Observed != Denied {
		// An EDE text beside SERVFAIL ("upstream failed") is no policy
		// reason; it stays in Detail.
		res.Reason = ""
	}
}

func countA(m *dns.Msg) int {
	n := 0
	for _, rr := range m.Answer {
		if _, ok := rr.(*dns.A); ok {
			n++
		}
	}
	return n
}
