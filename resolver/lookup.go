package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
)

// LookupIP resolves host for the proxy: A and AAAA concurrently through the
// shared cache, following the CNAME chain (at most Config.MaxCNAME links,
// asking again for the chain's end when the upstream's answer stops at a
// CNAME). Addrs lists the IPv4 addresses first, then IPv6, in answer order.
// An IP literal is returned as is. When one family fails and the other has
// addresses, the addresses win. Errors wrap ErrNXDomain, ErrNoAddress,
// ErrUpstream, ErrCNAMEChain, ErrMetadataName or ErrInvalidName; the
// Answer still carries Rcode, Duration and the CNAME chain for the audit
// record. Only records owned by host and its CNAME chain count (the Client
// filters every upstream answer); a chain that leads to a cloud metadata
// name ends there, unasked, with ErrMetadataName and no address, whatever
// the other family found: the caller denies it with reason metadata.
func (r *Resolver) LookupIP(ctx context.Context, host string) (Answer, error) {
	start := time.Now()
	if a, ok := ipLiteral(host); ok {
		return Answer{Addrs: []netip.Addr{a.Unmap()}, Rcode: dns.RcodeSuccess}, nil
	}
	name, err := fqdnKey(host)
	if err != nil {
		return Answer{Rcode: dns.RcodeFormatError}, fmt.Errorf("lookup %q: %w", host, err)
	}
	var f4 family
	f6 := r.lookupFamily(ctx, name, dns.TypeAAAA, true)
	if !f6.wouldWait {
		// AAAA came from the cache (or a recent failure): no wait to
		// overlap, so no goroutine (the common case of a name the pod
		// resolved).
		f4 = r.lookupFamily(ctx, name, dns.TypeA, false)
	} else {
		v6 := make(chan family, 1)
		// The caller's before-wait func is called in the caller's
		// goroutine only (WithBeforeWait).
		ctx6 := context.WithValue(ctx, beforeWaitKey{}, (func())(nil))
		go func() { v6 <- r.lookupFamily(ctx6, name, dns.TypeAAAA, false) }()
		f4 = r.lookupFamily(ctx, name, dns.TypeA, false)
		select {
		case f6 = <-v6:
		default:
			beforeWait(ctx)
			f6 = <-v6
		}
	}

	ans := Answer{
		Addrs:    append(f4.addrs, f6.addrs...),
		CNAMEs:   f4.cnames,
		Cached:   f4.cached && f6.cached,
		Stale:    f4.stale || f6.stale,
		Upstream: f4.upstream,
		Rcode:    dns.RcodeSuccess,
	}
	if len(ans.CNAMEs) == 0 {
		ans.CNAMEs = f6.cnames
	}
	if ans.Upstream == "" {
		ans.Upstream = f6.upstream
	}
	ans.TTL = minOf(f4, f6)
	ans.Duration = time.Since(start)
	metadata := errors.Is(f4.err, ErrMetadataName) || errors.Is(f6.err, ErrMetadataName)
	if len(ans.Addrs) > 0 && !metadata {
		return ans, nil
	}
	ans.Addrs = nil
	err = pickError(f4.err, f6.err)
	switch {
	case errors.Is(err, ErrNXDomain):
		ans.Rcode = dns.RcodeNameError
	case errors.Is(err, ErrNoAddress), errors.Is(err, ErrMetadataName):
	default:
		ans.Rcode = dns.RcodeServerFailure
	}
	return ans, fmt.Errorf("lookup %q: %w", host, err)
}

// family is the result of one address family's lookup.
type family struct {
	addrs    []netip.Addr
	cnames   []string
	ttl      uint32
	hasTTL   bool
	cached   bool
	stale    bool
	upstream string
	err      error
	// wouldWait: with noWait, a link of the chain needs an upstream; the
	// rest of the family is unset.
	wouldWait bool
}

// lookupFamily follows name's chain for qtype through Query; with noWait
// only as far as Query answers without an upstream (wouldWait otherwise).
func (r *Resolver) lookupFamily(ctx context.Context, name string, qtype uint16, noWait bool) family {
	f := family{cached: true}
	cur := name
	seen := map[string]bool{name: true}
	for {
		var res *Result
		var err error
		if noWait {
			var ok bool
			if res, err, ok = r.queryNow(cur, qtype); !ok {
				return family{wouldWait: true}
			}
		} else {
			res, err = r.Query(ctx, cur, qtype)
		}
		if err != nil {
			f.cached = false
			f.err = err
			return f
		}
		f.cached = f.cached && res.Cached
		f.stale = f.stale || res.Stale
		if f.upstream == "" {
			f.upstream = res.Upstream
		}
		msg := res.Msg
		f.noteTTL(msg)
		if msg.Rcode == dns.RcodeNameError {
			f.err = ErrNXDomain
			return f
		}
		asked := cur
		// Follow the chain inside this answer (RFC 1034 §3.6.2): the
		// upstream usually returns all of it.
		for {
			next := cnameOf(msg.Answer, cur)
			if next == "" {
				break
			}
			if policy.IsMetadataName(next) {
				// Never asked upstream: the chain leads to a cloud
				// metadata name, denied like the name itself.
				f.cnames = append(f.cnames, strings.TrimSuffix(next, "."))
				f.err = fmt.Errorf("%w: %s", ErrMetadataName, strings.TrimSuffix(next, "."))
				return f
			}
			if seen[next] || len(f.cnames) >= r.cfg.MaxCNAME {
				f.err = fmt.Errorf("%w (after %d links)", ErrCNAMEChain, len(f.cnames))
				return f
			}
			seen[next] = true
			f.cnames = append(f.cnames, strings.TrimSuffix(next, "."))
			cur = next
		}
		for _, rr := range msg.Answer {
			if !strings.EqualFold(rr.Header().Name, cur) {
				continue
			}
			switch v := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(v.A.To4()); ok && qtype == dns.TypeA {
					f.addrs = append(f.addrs, a)
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(v.AAAA.To16()); ok && qtype == dns.TypeAAAA {
					f.addrs = append(f.addrs, a)
				}
			}
		}
		if len(f.addrs) > 0 {
			return f
		}
		if cur == asked {
			// NODATA at the end of the chain.
			f.err = ErrNoAddress
			return f
		}
		// The answer stopped at a CNAME: ask for its target.
	}
}

func (f *family) noteTTL(msg *dns.Msg) {
	rrs := msg.Answer
	if len(rrs) == 0 {
		rrs = msg.Ns
	}
	if len(rrs) == 0 {
		return
	}
	t := MinTTL(rrs)
	if !f.hasTTL || t < f.ttl {
		f.ttl, f.hasTTL = t, true
	}
}

func cnameOf(rrs []dns.RR, owner string) string {
	for _, rr := range rrs {
		if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, owner) {
			return LowerASCII(dns.Fqdn(c.Target))
		}
	}
	return ""
}

// minOf returns the TTL of the answer: the smallest of the families that
// gave addresses, else of those that answered at all.
func minOf(fs ...family) uint32 {
	var ttl uint32
	found := false
	for _, pass := range []bool{true, false} {
		for _, f := range fs {
			if !f.hasTTL || (pass && len(f.addrs) == 0) {
				continue
			}
			if !found || f.ttl < ttl {
				ttl, found = f.ttl, true
			}
		}
		if found {
			return ttl
		}
	}
	return 0
}

// pickError chooses the error that says most about a name with no address:
// an upstream failure (we do not know), then NXDOMAIN, then the rest.
func pickError(a, b error) error {
	for _, target := range []error{ErrMetadataName, ErrUpstream, context.Canceled, context.DeadlineExceeded, ErrInvalidName, ErrCNAMEChain, ErrNXDomain} {
		for _, e := range []error{a, b} {
			if errors.Is(e, target) {
				return e
			}
		}
	}
	if a != nil {
		return a
	}
	if b != nil {
		return b
	}
	return ErrNoAddress
}

// ipLiteral parses host as an IP address (IPv4, IPv6, bracketed IPv6).
// Only a string holding a colon (IPv6) or ending in a digit (dotted
// IPv4) can be one, and a name is not handed to netip.ParseAddr: its
// error is an allocation per lookup of every name.
func ipLiteral(host string) (netip.Addr, bool) {
	h := strings.Trim(host, "[]")
	if h == "" || strings.IndexByte(h, ':') < 0 && (h[len(h)-1] < '0' || h[len(h)-1] > '9') {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(h)
	return a, err == nil
}
