package resolver

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
)

// filterAnswer keeps of an upstream answer to name what may be cached and
// handed on: the answer records of name and its CNAME chain
// (ownedAnswer), the authority section without addresses (it holds SOA,
// NS and DNSSEC records; an address there is no answer to anything asked),
// no additional section (glue is for resolvers, not for pods, and nothing
// of it is asked for).
func filterAnswer(m *dns.Msg, name string, maxCNAME int) {
	m.Answer = ownedAnswer(name, m.Answer, maxCNAME)
	ns := m.Ns[:0:0]
	for _, rr := range m.Ns {
		switch rr.Header().Rrtype {
		case dns.TypeA, dns.TypeAAAA, dns.TypeOPT:
			continue
		}
		ns = append(ns, rr)
	}
	m.Ns = ns
	m.Extra = nil
}

// ownedAnswer returns the records of answer owned by name and by the names
// of its CNAME chain, in chain order (RFC 1034 §3.6.2): a record owned by
// any other name is an upstream (or an attacker's authoritative server)
// speaking about something nobody asked for, and is dropped here, before
// it can be cached, recorded, handed to a pod or dialled by the proxy.
//
// The chain stops at a metadata name (policy.IsMetadataName): the CNAME
// pointing at it is kept, so that callers see where it went and deny it,
// but nothing owned by the metadata name is, and it is never asked for. It
// also stops after maxCNAME links, at a loop, and at an owner with a
// second CNAME (RFC 1034 §3.6.2 allows one). HTTPS and SVCB records lose
// their ech SvcParam (stripECH).
func ownedAnswer(name string, answer []dns.RR, maxCNAME int) []dns.RR {
	out := answer[:0:0]
	cur := name
	var seen []string
	for links := 0; ; links++ {
		next := ""
		for _, rr := range answer {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT || !strings.EqualFold(h.Name, cur) {
				continue
			}
			if c, ok := rr.(*dns.CNAME); ok {
				if next != "" {
					continue
				}
				next = LowerASCII(dns.Fqdn(c.Target))
			}
			stripECH(rr)
			out = append(out, rr)
		}
		if next == "" || links >= maxCNAME || strings.EqualFold(next, name) || contains(seen, next) ||
			policy.IsMetadataName(next) {
			return out
		}
		seen = append(seen, next)
		cur = next
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// stripECH removes the ech SvcParam (key 5, RFC 9460 §14.3.2, the
// Encrypted Client Hello configuration) from an HTTPS or SVCB record, in
// place: a client that finds no ECH configuration does not try ECH, whose
// encrypted inner ClientHello would name a host the proxy cannot check
// (the proxy refuses such ClientHellos unless a rule says ech: allow).
func stripECH(rr dns.RR) {
	var svcb *dns.SVCB
	switch v := rr.(type) {
	case *dns.SVCB:
		svcb = v
	case *dns.HTTPS:
		svcb = &v.SVCB
	default:
		return
	}
	kept := svcb.Value[:0]
	for _, kv := range svcb.Value {
		if kv.Key() != dns.SVCB_ECHCONFIG {
			kept = append(kept, kv)
		}
	}
	svcb.Value = kept
}
