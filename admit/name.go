package admit

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// DNSAnswer is where a DNS question admitted with AnyPort is answered.
type DNSAnswer int

const (
	// AnswerBlocked: NXDOMAIN with Extended DNS Error 15 (Blocked) and the
	// decision's reason.
	AnswerBlocked DNSAnswer = iota
	// AnswerUpstream: the shared cache and the upstreams.
	AnswerUpstream
	// AnswerCluster: the cluster DNS, uncached (a name under the cluster
	// domain, the PTR name of an address in ClusterCIDRs).
	AnswerCluster
	// AnswerSearch: NXDOMAIN, answered by egressd: a search-list expansion
	// of an allowed name, so that the stub resolver walks on down its
	// search list.
	AnswerSearch
)

// admitName is Admit of a DNS question (Request.AnyPort): the name as
// asked, lower case without the trailing dot, and where its answer comes
// from.
func (p *Pipeline) admitName(r Request) Admission {
	host := strings.TrimSuffix(resolver.LowerASCII(r.Host), ".")
	a := Admission{Host: RecordedHost(host)}
	if a.Decision, a.Err = p.gate(r.Client); a.Err != nil || r.Client == nil {
		return a
	}
	if r.Port != 0 {
		a.Decision, a.Err = policy.Denied(policy.ReasonBadRequest), fmt.Errorf("%w: %d with AnyPort", ErrPort, r.Port)
		return a
	}
	a.Decision, a.DNSAnswer = p.decideName(p.cfg.Policy(), r.Client, host)
	return a
}

// decideName decides a question of a known client and where it is
// answered. Order matters: metadata names first (never, in every mode);
// the cluster's own zones next, unless the name is a search-list expansion
// of an allowed name; then the policy, and only for a name it denies the
// search-expansion check (so that the common allowed path costs one
// Decide, and expansions are not recorded as denials).
func (p *Pipeline) decideName(snap *policy.Snapshot, c *policy.Client, host string) (policy.Decision, DNSAnswer) {
	if policy.IsMetadataName(host) {
		return policy.Denied(policy.ReasonMetadata), AnswerBlocked
	}
	if under(host, p.cfg.ClusterDomain) {
		if d, ok := p.searchExpansion(snap, c, host); ok {
			return d, AnswerSearch
		}
		// No rule decides the cluster's own names: the cluster DNS
		// answers them (NetworkPolicy governs in-cluster traffic).
		return policy.AllowedBecause(policy.ReasonClusterDomain), AnswerCluster
	}
	if p.isClusterReverse(host) {
		return policy.AllowedBecause(policy.ReasonClusterDomain), AnswerCluster
	}
	var d policy.Decision
	name, err := policy.NormalizeHost(host)
	if err != nil {
		d = policy.Denied(policy.ReasonInvalidHost)
	} else {
		// Port 0: does any rule of the pod allow the name at all? The port
		// is checked when the pod connects (docs/design.md, Resolver).
		d = p.decide(snap, c, name, 0)
	}
	if !d.Allowed() || d.WouldDeny {
		if e, ok := p.searchExpansion(snap, c, host); ok {
			return e, AnswerSearch
		}
	}
	if d.Allowed() {
		return d, AnswerUpstream
	}
	return d, AnswerBlocked
}

// isClusterReverse reports whether host is the PTR name of an address in
// ClusterCIDRs. Only such names go to the cluster DNS unasked: every other
// name in the reverse zones is decided by the policy like any name, since
// the cluster DNS forwards what it does not own, and "<secret>.113.0.203.
// in-addr.arpa" would reach the authoritative server of 203.0.113.0/24.
func (p *Pipeline) isClusterReverse(host string) bool {
	a, ok := parseReverse(host)
	if !ok {
		return false
	}
	for _, pr := range p.cfg.ClusterCIDRs {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// parseReverse returns the address whose PTR name host is: exactly four
// decimal labels 0-255 without leading zeros under in-addr.arpa (RFC 1035
// §3.5), exactly 32 hex nibbles under ip6.arpa (RFC 3596 §2.5). Anything
// else (a partial zone, extra labels in front) is not an address's name.
// host is lower case, without the trailing dot.
func parseReverse(host string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(host, ".in-addr.arpa"); ok {
		labels := strings.Split(rest, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, l := range labels {
			n, err := strconv.ParseUint(l, 10, 8)
			if err != nil || l != strconv.FormatUint(n, 10) {
				return netip.Addr{}, false
			}
			b[3-i] = byte(n)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(host, ".ip6.arpa"); ok {
		// "n.n.n. ... .n": 32 nibbles and 31 dots, least significant first.
		if len(rest) != 63 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i := range 32 {
			if i < 31 && rest[2*i+1] != '.' {
				return netip.Addr{}, false
			}
			v, ok := nibble(rest[2*i])
			if !ok {
				return netip.Addr{}, false
			}
			if i%2 == 0 {
				b[15-i/2] |= v
			} else {
				b[15-i/2] |= v << 4
			}
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func under(host, zone string) bool {
	return host == zone || (len(host) > len(zone) && strings.HasSuffix(host, zone) && host[len(host)-len(zone)-1] == '.')
}

// searchExpansion recognises a name that is an allowed name with one of
// the pod's search domains appended: "api.example.com.llm-prod.svc.cluster.local"
// is what a stub resolver with ndots:5 asks before "api.example.com". The
// pod's search list is known: "<ns>.svc.<cluster domain>", "svc.<cluster
// domain>", "<cluster domain>" (Kubernetes ClusterFirst), then the node's
// (Config.SearchDomains). The decision returned is the one for the allowed name,
// with reason search-expansion.
func (p *Pipeline) searchExpansion(snap *policy.Snapshot, c *policy.Client, host string) (policy.Decision, bool) {
	cd := p.cfg.ClusterDomain
	try := func(suffix string) (policy.Decision, bool) {
		if len(host) <= len(suffix)+1 || !under(host, suffix) {
			return policy.Decision{}, false
		}
		prefix := host[:len(host)-len(suffix)-1]
		if !strings.Contains(prefix, ".") {
			// A single label plus a search domain is an ordinary
			// cluster or corporate name, not an expansion.
			return policy.Decision{}, false
		}
		name, err := policy.NormalizeHost(prefix)
		if err != nil {
			return policy.Decision{}, false
		}
		d := p.decide(snap, c, name, 0)
		if !d.Allowed() || d.WouldDeny {
			// Only a name enforce allows has expansions: in audit mode
			// every name is allowed, and "kubernetes.default" would
			// make the cluster's own service names NXDOMAIN.
			return policy.Decision{}, false
		}
		return d.Because(policy.ReasonSearchExpansion), true
	}
	for _, suffix := range [...]string{c.Namespace + ".svc." + cd, "svc." + cd, cd} {
		if d, ok := try(suffix); ok {
			return d, true
		}
	}
	for _, suffix := range p.cfg.SearchDomains {
		if d, ok := try(suffix); ok {
			return d, true
		}
	}
	return policy.Decision{}, false
}

// NeverFilter is the one never-class answer filter of the DNS server
// (answers, SVCB hints, the transparent answer): Drop reports whether an
// address is in the guard's never class, and Reason is the one a denial
// of the name records, chosen by the guard's rule (policy.FirstRefusal,
// as policy.Guard.CheckAll chooses for a connection: the first).
type NeverFilter struct {
	Reason policy.Reason
}

// Drop reports whether a is in the never class, and keeps the reason.
func (f *NeverFilter) Drop(a netip.Addr) bool {
	cl, r := policy.Classify(a)
	if cl != policy.ClassNever {
		return false
	}
	f.Reason = policy.FirstRefusal(policy.Denied(f.Reason), policy.Denied(r)).Reason
	return true
}

// AllNever is the last step of an allowed DNS question: when every
// address of the answer is in the never class, the name is denied with
// the reason it returns (NeverFilter's); "" when one is not, or there is
// none. The DNS server and `explain --kind dns --resolve` call it.
func AllNever(addrs []netip.Addr) policy.Reason {
	var f NeverFilter
	for _, a := range addrs {
		if !f.Drop(a) {
			return ""
		}
	}
	return f.Reason
}
