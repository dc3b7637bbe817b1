package dnsserver

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/policy"
)

// served is an upstream answer as the server hands it to pods: the guard's
// never-class addresses (metadata, link-local, ...) stripped from the
// answer records, the SVCB/HTTPS hints and the authority section (nothing
// of an answer may carry one to the pod), the reason of the last class
// stripped from the answer ("" when none was), and whether its CNAME chain
// leads to a metadata name. Its slices are clipped, so an append never
// writes into them: a cache hit's are shared, read-only, with every hit of
// the same second (resolver.View), and so are the answer's texts
// for the audit record, computed here once instead of once a query.
type served struct {
	answer, ns []dns.RR
	never      policy.Reason
	metadata   bool
	// answers and cnames are the record's dns.answers and dns.cnames for
	// answer, when it is given whole (not truncated).
	answers, cnames []string
}

func servedOf(m *dns.Msg) *served {
	answer, never := stripNever(m.Answer)
	stripNeverHints(answer)
	sv := &served{answer: slices.Clip(answer), ns: slices.Clip(withoutNever(m.Ns)), never: never}
	for _, rr := range answer {
		if c, ok := rr.(*dns.CNAME); ok && policy.IsMetadataName(c.Target) {
			sv.metadata = true
		}
	}
	sv.answers, sv.cnames = answerTexts(sv.answer, nil)
	sv.answers = slices.Clip(sv.answers)
	return sv
}

// answerTexts returns the record's texts of an answer: addresses, and the
// data of other records; CNAME targets apart. answers is appended to.
func answerTexts(rrs []dns.RR, answers []string) ([]string, []string) {
	var cnames []string
	for _, rr := range rrs {
		switch v := rr.(type) {
		case *dns.CNAME:
			cnames = append(cnames, strings.TrimSuffix(v.Target, "."))
		case *dns.A:
			answers = append(answers, v.A.String())
		case *dns.AAAA:
			answers = append(answers, v.AAAA.String())
		default:
			answers = append(answers, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	}
	return answers, cnames
}

// withoutNever is stripNever without the reason, for sections where an
// address is only a by-product.
func withoutNever(rrs []dns.RR) []dns.RR {
	out, _ := stripNever(rrs)
	return out
}

// stripNever removes A and AAAA records whose address is in the guard's
// never class (metadata, link-local, unspecified, multicast): an allowed
// name must not hand a pod the way to 169.254.169.254. It returns the
// reason of the first class removed (neverFilter), or "" when nothing was.
// Private addresses stay: whether a rule's cidrs open them is decided per
// connection by the guard, and NetworkPolicy keeps pods from dialling them
// directly.
func stripNever(rrs []dns.RR) ([]dns.RR, policy.Reason) {
	var f neverFilter
	out := rrs[:0:0]
	for _, rr := range rrs {
		if a, ok := addrOfRR(rr); ok && f.Drop(a) {
			continue
		}
		out = append(out, rr)
	}
	return out, f.Reason
}

// neverFilter is admit's never-class filter (admit.NeverFilter), with
// dropIP for a record's net.IP.
type neverFilter struct{ admit.NeverFilter }

// stripNeverHints removes never-class addresses from the ipv4hint and
// ipv6hint of SVCB and HTTPS records (RFC 9460 §7.3): a client that
// connects by the hints (browsers do, before A/AAAA arrive) must not learn
// 169.254.169.254 from an allowed name any more than from its A record. A
// hint left empty is removed (an empty hint is malformed). A record that
// changes is replaced in rrs by a stripped copy: the records themselves may
// be the cache's, shared with other queries (Resolver.cached).
func stripNeverHints(rrs []dns.RR) {
	for i, rr := range rrs {
		svcb := svcbOf(rr)
		if svcb == nil || !hasNeverHint(svcb) {
			continue
		}
		c := dns.Copy(rr)
		rrs[i] = c
		svcb = svcbOf(c)
		kept := svcb.Value[:0]
		for _, kv := range svcb.Value {
			switch h := kv.(type) {
			case *dns.SVCBIPv4Hint:
				h.Hint = publicIPs(h.Hint)
				if len(h.Hint) == 0 {
					continue
				}
			case *dns.SVCBIPv6Hint:
				h.Hint = publicIPs(h.Hint)
				if len(h.Hint) == 0 {
					continue
				}
			}
			kept = append(kept, kv)
		}
		svcb.Value = kept
	}
}

func svcbOf(rr dns.RR) *dns.SVCB {
	switch v := rr.(type) {
	case *dns.SVCB:
		return v
	case *dns.HTTPS:
		return &v.SVCB
	}
	return nil
}

func hasNeverHint(svcb *dns.SVCB) bool {
	var f neverFilter
	for _, kv := range svcb.Value {
		var hint []net.IP
		switch h := kv.(type) {
		case *dns.SVCBIPv4Hint:
			hint = h.Hint
		case *dns.SVCBIPv6Hint:
			hint = h.Hint
		}
		for _, ip := range hint {
			if f.dropIP(ip) {
				return true
			}
		}
	}
	return false
}

// dropIP is Drop for a record's net.IP; one that is no address is dropped
// too (the guard's class of an invalid address is never).
func (f *neverFilter) dropIP(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return true
	}
	return f.Drop(a)
}

// publicIPs returns ips without the never-class ones, reusing ips.
func publicIPs(ips []net.IP) []net.IP {
	var f neverFilter
	out := ips[:0]
	for _, ip := range ips {
		if !f.dropIP(ip) {
			out = append(out, ip)
		}
	}
	return out
}

func hasAddress(rrs []dns.RR) bool {
	for _, rr := range rrs {
		if _, ok := addrOfRR(rr); ok {
			return true
		}
	}
	return false
}

func addrOfRR(rr dns.RR) (netip.Addr, bool) {
	switch v := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(v.A.To4())
		return a, ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(v.AAAA.To16())
		return a, ok
	}
	return netip.Addr{}, false
}
