package inject

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Annotations and the label of docs/design.md.
const (
	// AnnotationInject "false" on a pod opts it out. The same key as a
	// label opts it out before the API server calls the webhook at all
	// (the chart's objectSelector), since an objectSelector sees labels
	// only.
	AnnotationInject = "egressd.dev/inject"
	// AnnotationOverride "true" replaces proxy variables a container sets.
	AnnotationOverride = "egressd.dev/inject-override"
	// AnnotationInjected carries the injecting egressd's version.
	AnnotationInjected = "egressd.dev/injected"
)

// Config is what the mutation depends on. Validate it once at startup.
type Config struct {
	// ProxyURL is egressd's proxy, http://<service>.<namespace>.svc:3128.
	// Required.
	ProxyURL string
	// ClusterDomain; zero means cluster.local.
	ClusterDomain string
	// APIServer are the API server Service's addresses (10.96.0.1); nil
	// means none is added (then in-cluster clients that use the
	// kubernetes.default.svc name are still covered by .svc).
	APIServer []netip.Addr
	// ServiceCIDRs are the cluster's Service ranges; nil means none.
	ServiceCIDRs []netip.Prefix
	// NoProxy are user additions (inject.noProxy); each must stay inside
	// the cluster (see checkNoProxy). Nil means none.
	NoProxy []string
	// DNS is egressd's resolver Service address; the zero Addr leaves the
	// pods' DNS alone.
	DNS netip.Addr
	// Version goes into egressd.dev/injected; zero means "unknown".
	Version string
	// Never are the guard's never-class ranges (cloud metadata and
	// link-local addresses: policy.NeverPrefixes, passed in because this
	// package imports no other of the module). No NO_PROXY entry, Service
	// CIDR, API server address, DNS address or proxy address may be one
	// or contain one: a pod would dial it directly instead of through
	// egressd. Required: Validate refuses a Config without them, so that
	// no caller forgets the check.
	Never []netip.Prefix
}

const defaultClusterDomain = "cluster.local"

func (c Config) clusterDomain() string {
	if c.ClusterDomain == "" {
		return defaultClusterDomain
	}
	return strings.TrimSuffix(strings.ToLower(c.ClusterDomain), ".")
}

func (c Config) version() string {
	if c.Version == "" {
		return "unknown"
	}
	return c.Version
}

// Validate reports every field a person has to fix.
func (c Config) Validate() error {
	u, err := url.Parse(c.ProxyURL)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Path != "" && u.Path != "/" || u.User != nil {
		return fmt.Errorf("%w: proxy URL %q: want http://<service>.<namespace>.svc:<port>", ErrBadConfig, c.ProxyURL)
	}
	if len(c.Never) == 0 {
		return fmt.Errorf("%w: the guard's never-class ranges are required (policy.NeverPrefixes)", ErrBadConfig)
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := c.checkNever(netip.PrefixFrom(a, a.BitLen())); err != nil {
			return fmt.Errorf("%w: proxy URL %q %w", ErrBadConfig, c.ProxyURL, err)
		}
	}
	cd := c.clusterDomain()
	if err := checkClusterDomain(cd); err != nil {
		return err
	}
	for _, e := range c.NoProxy {
		if err := c.checkNoProxy(e, cd); err != nil {
			return err
		}
	}
	for _, p := range c.ServiceCIDRs {
		if !p.IsValid() || !internalAddr(p.Addr()) {
			return fmt.Errorf("%w: service CIDR %s: want a private or loopback range", ErrBadConfig, p)
		}
		if err := c.checkNever(p); err != nil {
			return fmt.Errorf("%w: service CIDR %s %w", ErrBadConfig, p, err)
		}
	}
	for _, a := range c.APIServer {
		if !a.IsValid() {
			return fmt.Errorf("%w: API server address missing", ErrBadConfig)
		}
		if err := c.checkNever(netip.PrefixFrom(a, a.BitLen())); err != nil {
			return fmt.Errorf("%w: API server address %s %w", ErrBadConfig, a, err)
		}
	}
	if c.DNS.IsValid() {
		if err := c.checkNever(netip.PrefixFrom(c.DNS, c.DNS.BitLen())); err != nil {
			return fmt.Errorf("%w: DNS address %s %w", ErrBadConfig, c.DNS, err)
		}
	}
	return nil
}

// checkNever refuses a range (an address is a full-length one) that is,
// is inside or contains an address of the guard's never class, naming
// that address or range: NO_PROXY with it, or a DNS or proxy address of
// it, would send a pod to the metadata service around egressd (the
// never class exists so that no configuration leads there).
func (c Config) checkNever(p netip.Prefix) error {
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-(p.Addr().BitLen()-p.Addr().Unmap().BitLen())).Masked()
	for _, n := range c.Never {
		if !n.Overlaps(p) {
			continue
		}
		if n.Bits() >= p.Bits() {
			name := n.String()
			if n.IsSingleIP() {
				name = n.Addr().String()
			}
			return fmt.Errorf("covers %s, a cloud metadata or link-local address that egressd never opens (the guard's never class)", name)
		}
		return fmt.Errorf("is inside %s, a cloud metadata or link-local range that egressd never opens (the guard's never class)", n)
	}
	return nil
}

// checkClusterDomain: `.<cluster-domain>` goes into NO_PROXY, so the
// domain must not be a public suffix (".com") nor a registrable domain
// whose other names are public ("example.com": every www.example.com would
// go around egressd). A private suffix like cluster.local, or a subdomain
// of a registrable domain (k8s.example.com), is accepted.
func checkClusterDomain(cd string) error {
	labels := strings.Split(cd, ".")
	for _, l := range labels {
		if l == "" || !validLabel(l) {
			return fmt.Errorf("%w: cluster domain %q is not a DNS name", ErrBadConfig, cd)
		}
	}
	if len(labels) < 2 {
		return fmt.Errorf("%w: cluster domain %q: a single label would cover a top-level domain", ErrBadConfig, cd)
	}
	suffix, icann := publicsuffix.PublicSuffix(cd)
	if icann && (suffix == cd || strings.Count(cd, ".") == strings.Count(suffix, ".")+1) {
		return fmt.Errorf("%w: cluster domain %q is a public suffix or a registrable domain: NO_PROXY .%s would send public names around egressd", ErrBadConfig, cd, cd)
	}
	return nil
}

// checkNoProxy decides which user NO_PROXY entries may be added. A name
// entry must end in .svc or in the cluster domain (with or without a
// leading dot): every other name can be an external one. Refused: "*",
// bare labels ("redis" may be a TLD to curl), public suffixes, names
// outside the cluster. Address entries must be loopback or private
// (RFC 1918, RFC 4193, RFC 6598) addresses or ranges: a public range would
// let its addresses be dialled directly. The NetworkPolicy would refuse
// such a direct dial anyway; refusing it here makes the failure visible at
// startup instead of at the first request.
func (c Config) checkNoProxy(entry, cd string) error {
	e := strings.ToLower(strings.TrimSpace(entry))
	if e == "" || strings.ContainsAny(e, ", \t*") {
		return fmt.Errorf("%w: %q: empty, a list or a wildcard", ErrBadNoProxy, entry)
	}
	if p, err := netip.ParsePrefix(e); err == nil {
		if !internalAddr(p.Masked().Addr()) || p.Bits() < minBits(p.Addr()) {
			return fmt.Errorf("%w: %q: not a private or loopback range", ErrBadNoProxy, entry)
		}
		if err := c.checkNever(p); err != nil {
			return fmt.Errorf("%w: %q %w", ErrBadNoProxy, entry, err)
		}
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		if !internalAddr(a) {
			return fmt.Errorf("%w: %q: not a private or loopback address", ErrBadNoProxy, entry)
		}
		if err := c.checkNever(netip.PrefixFrom(a, a.BitLen())); err != nil {
			return fmt.Errorf("%w: %q %w", ErrBadNoProxy, entry, err)
		}
		return nil
	}
	name := strings.TrimSuffix(strings.TrimPrefix(e, "."), ".")
	for _, l := range strings.Split(name, ".") {
		if !validLabel(l) {
			return fmt.Errorf("%w: %q is not a host name, address or range", ErrBadNoProxy, entry)
		}
	}
	switch {
	case name == "localhost":
		return nil
	case name == "svc" || strings.HasSuffix(name, ".svc"),
		name == cd || strings.HasSuffix(name, "."+cd):
		return nil
	}
	return fmt.Errorf("%w: %q: a name outside .svc and .%s may be an external name", ErrBadNoProxy, entry, cd)
}

// minBits refuses ranges wider than the private blocks themselves (a /7
// that starts inside 10/8 covers public space).
func minBits(a netip.Addr) int {
	switch {
	case a.Is4() && a.IsLoopback():
		return 8
	case a.Is4():
		p, _ := privateBlock(a)
		return p.Bits()
	case a.IsLoopback():
		return 128
	default:
		return 7 // fc00::/7
	}
}

// privateBlocks are the ranges a NO_PROXY address may fall in besides
// loopback: RFC 1918, RFC 6598 (shared, used for Service CIDRs by some
// clouds) and RFC 4193.
var privateBlocks = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

func privateBlock(a netip.Addr) (netip.Prefix, bool) {
	for _, p := range privateBlocks {
		if p.Contains(a.Unmap()) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func internalAddr(a netip.Addr) bool {
	if a.Unmap().IsLoopback() {
		return true
	}
	_, ok := privateBlock(a)
	return ok
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// noProxy is the NO_PROXY value of docs/design.md, in its order.
func (c Config) noProxy() string {
	cd := c.clusterDomain()
	parts := []string{"localhost", "127.0.0.1", "::1", ".svc", ".svc." + cd, "." + cd}
	for _, a := range c.APIServer {
		parts = append(parts, a.String())
	}
	for _, p := range c.ServiceCIDRs {
		parts = append(parts, p.Masked().String())
	}
	for _, e := range c.NoProxy {
		parts = append(parts, strings.ToLower(strings.TrimSpace(e)))
	}
	return strings.Join(parts, ",")
}
