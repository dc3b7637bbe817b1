package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
)

// rules is the bench policy's one allow rule: CONNECT targets by name and
// port, and the address ranges their names may resolve to.
type rules struct {
	targets map[string]bool // "host:port", host lower case
	cidrs   []netip.Prefix
	lookup  lookupFunc
}

// lookupFunc resolves a name (net.Resolver.LookupNetIP's shape).
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func newRules(allow, cidrs []string, lookup lookupFunc) (*rules, error) {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	r := &rules{targets: map[string]bool{}, lookup: lookup}
	for _, a := range allow {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("goproxy-inspect: -allow %q: want host:port", a)
		}
		r.targets[strings.ToLower(host)+":"+port] = true
	}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("goproxy-inspect: -cidr %q: %w", c, err)
		}
		r.cidrs = append(r.cidrs, p.Masked())
	}
	return r, nil
}

// connect decides a CONNECT target; an allowed one gets its tunnel, with
// an http.Transport of its own to the origin.
func (r *rules) connect(target string, roots *x509.CertPool) (*tunnel, bool) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !r.targets[host+":"+port] {
		return nil, false
	}
	return &tunnel{host: host, port: port, dial: r.dial, roots: roots}, true
}

// dial resolves the name, refuses the dial unless every address is inside
// the rule's ranges, and dials the first address it checked (never the
// name again).
func (r *rules) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("goproxy-inspect: dial %q: %w", addr, err)
	}
	ips, err := r.lookup(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("goproxy-inspect: resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if !r.allowsAddr(ip.Unmap()) {
			return nil, fmt.Errorf("goproxy-inspect: %s resolves to %s, outside the rule's ranges", host, ip)
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("goproxy-inspect: %s has no address", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(ips[0].Unmap().String(), port))
}

func (r *rules) allowsAddr(ip netip.Addr) bool {
	for _, p := range r.cidrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// refuseDial is goproxy's shared transport's dial: nothing may use it.
func refuseDial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("goproxy-inspect: no dial outside an accepted tunnel")
}

// tunnel is one accepted CONNECT: its host and port, and its transport,
// made at the first request.
type tunnel struct {
	host, port string
	dial       func(context.Context, string, string) (net.Conn, error)
	roots      *x509.CertPool
	once       sync.Once
	tr         *http.Transport
}

// RoundTrip is goproxy's per-CONNECT RoundTripper (ProxyCtx.RoundTripper,
// carried to every request of the MITMed tunnel). goproxy builds the
// request's URL from its Host (https.go, "We prioritize req.Host"): a
// Host without a port would be sent to :443. The request goes to the
// tunnel's host and port instead (Host itself is checked, and kept). The
// first request says which protocol the client speaks; the origin is
// offered the same, as egressd does (h2 to h2, HTTP/1.1 to HTTP/1.1).
func (t *tunnel) RoundTrip(req *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
	req.URL.Host = net.JoinHostPort(t.host, t.port)
	t.once.Do(func() {
		t.tr = &http.Transport{
			DialContext:         t.dial,
			TLSClientConfig:     &tls.Config{RootCAs: t.roots, ServerName: t.host, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   req.ProtoMajor == 2,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     5 * time.Minute, // egressd's idle timeout of a tunnel
			TLSHandshakeTimeout: 10 * time.Second,
		}
	})
	return t.tr.RoundTrip(req)
}

// hostMatches is egressd's host check: Host names the tunnel's host (case
// and a trailing dot aside) and, if it gives a port, the tunnel's port.
func (t *tunnel) hostMatches(h string) bool {
	host := h
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		if h[i+1:] != t.port { // an empty port after a colon is no port of ours either
			return false
		}
		host = h[:i]
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), t.host)
}

// loadRoots reads the CA bundle the origin must chain to; none: the
// system roots.
func loadRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("goproxy-inspect: -upstream-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("goproxy-inspect: -upstream-ca %s: no certificates", file)
	}
	return pool, nil
}
