package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
)

// Config is what the command line sets.
type Config struct {
	Addr       string   // listen address; zero: none (required)
	CACert     string   // minting CA certificate (PEM file); zero: none (required)
	CAKey      string   // minting CA key (PEM file); zero: none (required)
	UpstreamCA string   // CA bundle the origin must chain to; zero: system roots
	Allow      []string // host:port targets CONNECT may name; zero: none allowed
	CIDRs      []string // addresses the dial may reach; zero: none
	H2         bool     // goproxy's AllowHTTP2; zero: HTTP/1.1 only (the command's default: on)
	Verbose    bool     // goproxy's own log; zero: its warnings discarded

	lookup lookupFunc // resolver of the dial; zero: net.DefaultResolver (tests set it)
}

func main() {
	var c Config
	var allow, cidrs string
	flag.StringVar(&c.Addr, "addr", "127.0.0.1:14190", "listen address")
	flag.StringVar(&c.CACert, "ca-cert", "", "minting CA certificate (PEM)")
	flag.StringVar(&c.CAKey, "ca-key", "", "minting CA key (PEM)")
	flag.StringVar(&c.UpstreamCA, "upstream-ca", "", "CA bundle the origin must chain to (PEM)")
	flag.StringVar(&allow, "allow", "up.bench.test:18443", "comma-separated host:port targets CONNECT may name")
	flag.StringVar(&cidrs, "cidr", "127.0.0.0/8", "comma-separated address ranges the dial may reach")
	flag.BoolVar(&c.H2, "h2", true, "goproxy AllowHTTP2: HTTP/2 to a client that offers it")
	flag.BoolVar(&c.Verbose, "v", false, "goproxy's log to stderr")
	flag.Parse()
	c.Allow, c.CIDRs = splitList(allow), splitList(cidrs)

	srv, err := newServer(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goproxy-inspect:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goproxy-inspect:", err)
		os.Exit(1)
	}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "goproxy-inspect:", err)
		os.Exit(1)
	}
}

// newServer builds the goproxy server and the http.Server around it.
func newServer(c Config) (*http.Server, error) {
	if c.CACert == "" || c.CAKey == "" {
		return nil, errors.New("goproxy-inspect: -ca-cert and -ca-key are required")
	}
	ca, err := tls.LoadX509KeyPair(c.CACert, c.CAKey)
	if err != nil {
		return nil, fmt.Errorf("goproxy-inspect: minting CA: %w", err)
	}
	rules, err := newRules(c.Allow, c.CIDRs, c.lookup)
	if err != nil {
		return nil, err
	}
	roots, err := loadRoots(c.UpstreamCA)
	if err != nil {
		return nil, err
	}

	p := goproxy.NewProxyHttpServer()
	p.AllowHTTP2 = c.H2
	p.CertStore = newCertCache()
	if !c.Verbose {
		p.Logger = log.New(io.Discard, "", 0)
	}
	// Nothing leaves through goproxy's shared transport (or its CONNECT
	// dial): every accepted tunnel has its own (tunnel.RoundTrip).
	p.Tr = &http.Transport{DialContext: refuseDial}
	p.ConnectDial = nil
	mitm := &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: goproxy.TLSConfigFromCA(&ca)}
	refuse := &goproxy.ConnectAction{Action: goproxy.ConnectReject}
	p.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		t, ok := rules.connect(host, roots)
		if !ok {
			ctx.Resp = forbidden(ctx.Req, "target-not-allowed")
			return refuse, host
		}
		ctx.UserData = t
		ctx.RoundTripper = t
		return mitm, host
	})
	p.OnRequest().DoFunc(func(req *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		t, ok := ctx.UserData.(*tunnel)
		switch {
		case !ok: // a plain-HTTP proxy request: never inside an inspected tunnel
			return req, forbidden(req, "not-inspected")
		case !t.hostMatches(req.Host):
			return req, forbidden(req, "host-mismatch")
		}
		return req, nil
	})
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}, nil
}

// forbidden is the 403 the proxy answers a refused CONNECT or request with.
func forbidden(req *http.Request, reason string) *http.Response {
	resp := goproxy.NewResponse(req, goproxy.ContentTypeText, http.StatusForbidden, reason+"\n")
	resp.Header.Set("X-Egressd-Reason", reason)
	return resp
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
