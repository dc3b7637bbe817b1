package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// load starts the client loops on wg until ctx ends.
func (s *soak) load(ctx context.Context, wg *sync.WaitGroup, rate int) {
	pods := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}
	every := time.Second / time.Duration(max(rate, 1))
	for _, ip := range pods {
		wg.Go(func() { s.loop(ctx, every, func() { s.newConn(ip, "ok.soak.test", s.tlsPort, true) }) })
		wg.Go(func() { s.loop(ctx, every, func() { s.httpGet(ip) }) })
		wg.Go(func() { s.loop(ctx, every, func() { s.query(ip, "udp", "ok.soak.test.") }) })
		wg.Go(func() { s.keepAlive(ctx, ip) })
	}
	wg.Go(func() { s.loop(ctx, every, func() { s.query("127.0.0.2", "tcp", "keep.soak.test.") }) })
	wg.Go(func() { s.loop(ctx, every, func() { s.query("127.0.0.3", "udp", "denied.soak.test.") }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.4", "denied.soak.test", s.tlsPort, false) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.5", "169.254.169.254", "80", false) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.6", "churn.soak.test", s.tlsPort, true) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.7", "ok.soak.test", s.tlsPort, true) }) })
	wg.Go(func() { s.loop(ctx, every*4, func() { s.newConn("127.0.0.9", "ok.soak.test", s.tlsPort, false) }) })
	wg.Go(func() { s.loop(ctx, every*4, func() { s.query("127.0.0.9", "udp", "ok.soak.test.") }) })
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// loop calls f every interval (jittered) until ctx ends.
func (s *soak) loop(ctx context.Context, every time.Duration, f func()) {
	for ctx.Err() == nil {
		f()
		d := every/2 + rand.N(every)
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", addr)
}

// connect sends a CONNECT from src and returns the connection and status.
// The request counts once it is written.
func (s *soak) connect(src, host, port string) (net.Conn, *bufio.Reader, int, error) {
	c, err := dialFrom(src, s.proxy)
	if err != nil {
		return nil, nil, 0, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	target := net.JoinHostPort(host, port)
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, nil, 0, err
	}
	s.count(src, kConnect)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return c, br, resp.StatusCode, nil
}

func (s *soak) count(src, kind string) {
	s.sent.add(src, kind, 1)
	s.requests.Add(1)
}

// newConn: one CONNECT, a full TLS handshake and GET /small when allowed.
func (s *soak) newConn(src, host, port string, mayAllow bool) {
	c, br, status, err := s.connect(src, host, port)
	if err != nil {
		s.fail("connect "+host, err)
		return
	}
	defer c.Close()
	if status != http.StatusOK {
		if status != http.StatusForbidden {
			s.fail("connect "+host, fmt.Errorf("status %d", status))
		}
		return
	}
	if !mayAllow {
		s.fail("connect "+host, errors.New("allowed, want a denial"))
		return
	}
	if err := s.tlsGet(&bufConn{Conn: c, r: br}, host, 1); err != nil && !revokedErr(err) {
		s.fail("tls "+host, err)
	}
}

// revokedErr: a tunnel cut by a policy or pod change (churn hosts) reads
// EOF or a reset; that is the product working.
func revokedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// tlsGet does n GET /small over one TLS connection.
func (s *soak) tlsGet(c net.Conn, host string, n int) error {
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: s.caPool})
	if err := tc.Handshake(); err != nil {
		return err
	}
	br := bufio.NewReader(tc)
	for range n {
		if _, err := fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET status %d", resp.StatusCode)
		}
	}
	return nil
}

// keepAlive holds tunnels open for 1–10 s each, a GET every 100 ms.
func (s *soak) keepAlive(ctx context.Context, src string) {
	for ctx.Err() == nil {
		c, br, status, err := s.connect(src, "keep.soak.test", s.tlsPort)
		if err != nil {
			s.fail("keep-alive connect", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if status != http.StatusOK {
			s.fail("keep-alive connect", fmt.Errorf("status %d", status))
			c.Close()
			continue
		}
		_ = c.SetDeadline(time.Time{})
		tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "keep.soak.test", RootCAs: s.caPool})
		end := time.Now().Add(time.Second + rand.N(9*time.Second))
		err = tc.Handshake()
		r := bufio.NewReader(tc)
		for err == nil && time.Now().Before(end) && ctx.Err() == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err = io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: keep.soak.test\r\n\r\n"); err != nil {
				break
			}
			var resp *http.Response
			if resp, err = http.ReadResponse(r, nil); err != nil {
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			s.fail("keep-alive", err)
		}
		c.Close()
	}
}

// httpGet: absolute-form GET through the proxy on a fresh connection.
func (s *soak) httpGet(src string) {
	c, err := dialFrom(src, s.proxy)
	if err != nil {
		s.fail("http dial", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	u := "http://ok.soak.test:" + s.httpPort + "/small?token=SECRET"
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ok.soak.test:%s\r\nConnection: close\r\n\r\n", u, s.httpPort); err != nil {
		s.fail("http write", err)
		return
	}
	s.count(src, kHTTP)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		s.fail("http read", err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		s.fail("http", fmt.Errorf("status %d", resp.StatusCode))
	}
}

// query sends one DNS query from src over net (udp or tcp).
func (s *soak) query(src, network, name string) {
	var local net.Addr
	if network == "udp" {
		local = &net.UDPAddr{IP: net.ParseIP(src)}
	} else {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	cl := &dns.Client{Net: network, Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	conn, err := cl.Dial(s.dnsAddr)
	if err != nil {
		s.fail("dns dial "+network, err)
		return
	}
	defer conn.Close()
	if err := conn.WriteMsg(m); err != nil {
		s.fail("dns write "+network, err)
		return
	}
	s.count(src, kDNS)
	if _, err := conn.ReadMsg(); err != nil {
		s.fail("dns read "+network, err)
	}
}
