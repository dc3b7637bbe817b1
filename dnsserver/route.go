package dnsserver

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/egressd/egressd/policy"
)

type route int

const (
	routeBlocked  route = iota // NXDOMAIN + EDE 15
	routeUpstream              // the shared cache and the upstreams
	routeCluster               // the cluster DNS, uncached
	routeSearch                // NXDOMAIN, answered here: a search-list expansion
)

// route decides where a query of a known client goes and sets qr.dec to
// the decision the audit record carries. Order matters: metadata names
// first (never, in every mode); the cluster's own zones next, unless the
// name is a search-list expansion of an allowed name; then the policy,
// and only for a name it denies the search-expansion check (so that the
// common allowed path costs one Decide, and expansions are not recorded as
// denials).
func (s *Server) route(qr *query) route {
	host := qr.host
	if policy.IsMetadataName(host) {
		qr.dec = policy.Denied(policy.ReasonMetadata)
		return routeBlocked
	}
	snap := s.cfg.Policy()
	if under(host, s.cfg.ClusterDomain) {
		if d, ok := s.searchExpansion(snap, qr.client, host); ok {
			qr.dec = d
			return routeSearch
		}
		// No rule decides the cluster's own names: the cluster DNS
		// answers them (NetworkPolicy governs in-cluster traffic).
		qr.dec = policy.AllowedBecause(policy.ReasonClusterDomain)
		return routeCluster
	}
	if s.isClusterReverse(host) {
		qr.dec = policy.AllowedBecause(policy.ReasonClusterDomain)
		return routeCluster
	}
	name, err := policy.NormalizeHost(host)
	if err != nil {
		qr.dec = policy.Denied(policy.ReasonInvalidHost)
	} else {
		// Port 0: does any rule of the pod allow the name at all? The port
		// is checked when the pod connects (docs/design.md, Resolver).
		qr.dec = snap.Decide(policy.DecideArgs{Client: qr.client, Host: name, Port: 0, Mode: s.cfg.Mode})
	}
	if !qr.dec.Allowed() || qr.dec.WouldDeny {
		if d, ok := s.searchExpansion(snap, qr.client, host); ok {
			qr.dec = d
			return routeSearch
		}
	}
	if qr.dec.Allowed() {
		return routeUpstream
	}
	return routeBlocked
}

// isClusterReverse reports whether host is the PTR name of an address in
// ClusterCIDRs. Only such names go to the cluster DNS unasked: every other
// name in the reverse zones is decided by the policy like any name, since
// the cluster DNS forwards what it does not own, and "<secret>.113.0.203.
// in-addr.arpa" would reach the authoritative server of 203.0.113.0/24.
func (s *Server) isClusterReverse(host string) bool {
	a, ok := parseReverse(host)
	if !ok {
		return false
	}
	for _, p := range s.cfg.ClusterCIDRs {
		if p.Contains(a) {
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
// (SearchDomains). The decision returned is the one for the allowed name,
// with reason search-expansion.
func (s *Server) searchExpansion(snap *policy.Snapshot, c *policy.Client, host string) (policy.Decision, bool) {
	cd := s.cfg.ClusterDomain
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
		d := snap.Decide(policy.DecideArgs{Client: c, Host: name, Port: 0, Mode: s.cfg.Mode})
		if !d.Allowed() {
			return policy.Decision{}, false
		}
		return d.Because(policy.ReasonSearchExpansion), true
	}
	for _, suffix := range [...]string{c.Namespace + ".svc." + cd, "svc." + cd, cd} {
		if d, ok := try(suffix); ok {
			return d, true
		}
	}
	for _, suffix := range s.suffixes {
		if d, ok := try(suffix); ok {
			return d, true
		}
	}
	return policy.Decision{}, false
}
