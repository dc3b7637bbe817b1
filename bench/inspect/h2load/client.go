package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/net/http2"
)

// client opens inspected tunnels through the proxy to the target and
// speaks proto inside them.
type client struct {
	proxyAddr string // proxy host:port
	target    string // CONNECT target and Host, host:port
	proto     string // "h1" or "h2"
	tlsConf   *tls.Config
	h2        *http2.Transport
	opTimeout time.Duration
}

func newClient(proxyAddr, target, proto string, tlsConf *tls.Config, opTimeout time.Duration) (*client, error) {
	c := &client{proxyAddr: proxyAddr, target: target, proto: proto, opTimeout: opTimeout, h2: &http2.Transport{}}
	c.tlsConf = tlsConf.Clone()
	switch proto {
	case "h1":
		c.tlsConf.NextProtos = []string{"http/1.1"}
	case "h2":
		c.tlsConf.NextProtos = []string{"h2"}
	default:
		return nil, fmt.Errorf("h2load: -proto %q: want h1 or h2", proto)
	}
	return c, nil
}

// conn is one inspected tunnel speaking the client's protocol. get may be
// called concurrently on an h2 conn, one at a time on an h1 conn.
type conn interface {
	get(path string, close bool, deadline time.Time) (int64, error)
	Close() error
}

// open makes a new tunnel: TCP to the proxy, CONNECT, the TLS handshake
// with the proxy's leaf (which must chain to the minting CA) and, for h2,
// the connection preface.
func (c *client) open(deadline time.Time) (conn, error) {
	raw, err := net.DialTimeout("tcp", c.proxyAddr, time.Until(deadline))
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(deadline)
	if _, err := io.WriteString(raw, "CONNECT "+c.target+" HTTP/1.1\r\nHost: "+c.target+"\r\n\r\n"); err != nil {
		raw.Close()
		return nil, err
	}
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("CONNECT: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		raw.Close()
		return nil, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	if br.Buffered() > 0 {
		raw.Close()
		return nil, fmt.Errorf("CONNECT: %d bytes after the 200", br.Buffered())
	}
	tc := tls.Client(raw, c.tlsConf)
	if err := tc.Handshake(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS: %w", err)
	}
	want := map[string]string{"h1": "http/1.1", "h2": "h2"}[c.proto]
	if got := tc.ConnectionState().NegotiatedProtocol; got != want {
		tc.Close()
		return nil, fmt.Errorf("ALPN: the proxy chose %q, want %q", got, want)
	}
	if c.proto == "h1" {
		tc.SetDeadline(time.Time{})
		return &h1conn{tc: tc, br: bufio.NewReader(tc), host: c.target}, nil
	}
	cc, err := c.h2.NewClientConn(tc)
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("h2: %w", err)
	}
	tc.SetDeadline(time.Time{})
	return &h2conn{cc: cc, tc: tc, base: "https://" + c.target}, nil
}

type h1conn struct {
	tc   *tls.Conn
	br   *bufio.Reader
	host string
}

func (h *h1conn) get(path string, close bool, deadline time.Time) (int64, error) {
	h.tc.SetDeadline(deadline)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + h.host + "\r\n"
	if close {
		req += "Connection: close\r\n"
	}
	if _, err := io.WriteString(h.tc, req+"\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		return 0, err
	}
	return drain(resp)
}

func (h *h1conn) Close() error { return h.tc.Close() }

type h2conn struct {
	cc   *http2.ClientConn
	tc   *tls.Conn
	base string
}

func (h *h2conn) get(path string, _ bool, deadline time.Time) (int64, error) {
	u, err := url.Parse(h.base + path)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req := (&http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}).WithContext(ctx)
	resp, err := h.cc.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	return drain(resp)
}

func (h *h2conn) Close() error {
	h.cc.Close()
	return h.tc.Close()
}

// drain reads the body to its end; anything but 200 is an error.
func drain(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("after %d body bytes: %w", n, err)
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("status %s (%s)", resp.Status, resp.Header.Get("X-Egressd-Reason"))
	}
	return n, nil
}
