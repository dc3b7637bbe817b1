package proxy

// Adversarial tests of the HTTP entries (see adversarial_test.go).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/policy"
)

// TestAdversarialConnectTarget: spellings of the CONNECT target that some
// parser somewhere reads as another host.
func TestAdversarialConnectTarget(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	look := staticLookup{
		"models.test": {lo}, "evil.test": {lo}, "self.adv.test": {lo},
		"0x7f000001": {lo}, "xn--mdels-5we.test": {lo}, // must never be asked
	}
	e := newEnv(t, envOpt{lookup: look, extra: advRules, self: true})
	tls := strconv.Itoa(e.tlsPort)
	_, proxyPort, _ := net.SplitHostPort(e.addr)
	long := strings.Repeat("a", 60) + "."
	for _, tc := range []struct {
		name   string
		raw    string // request head; TARGET is the usual Host line
		status int
		reason string
		peer   string
	}{
		{"decimal IPv4 2130706433 is 127.0.0.1 (inet_aton)", "CONNECT 2130706433:" + tls + " HTTP/1.1\r\nHost: 2130706433:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"hex IPv4 0x7f000001 is 127.0.0.1", "CONNECT 0x7f000001:" + tls + " HTTP/1.1\r\nHost: 0x7f000001:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"octal IPv4 0177.0.0.1 is 127.0.0.1", "CONNECT 0177.0.0.1:" + tls + " HTTP/1.1\r\nHost: 0177.0.0.1:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"short IPv4 127.1 is 127.0.0.1", "CONNECT 127.1:" + tls + " HTTP/1.1\r\nHost: 127.1:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"IPv6 link-local with zone", "CONNECT [fe80::1%25eth0]:" + tls + " HTTP/1.1\r\nHost: [fe80::1%25eth0]:" + tls + "\r\n\r\n", 403, "link-local", ""},
		{"IPv6 AWS IMDS literal (starts with a letter)", "CONNECT [fd00:ec2::254]:80 HTTP/1.1\r\nHost: x\r\n\r\n", 403, "metadata", ""},
		{"IPv6 link-local literal", "CONNECT [fe80::a9fe:a9fe]:80 HTTP/1.1\r\nHost: x\r\n\r\n", 403, "link-local", ""},
		{"IPv4-mapped IPv6 metadata", "CONNECT [::ffff:169.254.169.254]:" + tls + " HTTP/1.1\r\nHost: [::ffff:169.254.169.254]:" + tls + "\r\n\r\n", 403, "metadata", ""},
		{"NAT64 metadata literal", "CONNECT [64:ff9b::a9fe:a9fe]:" + tls + " HTTP/1.1\r\nHost: [64:ff9b::a9fe:a9fe]:" + tls + "\r\n\r\n", 403, "metadata", ""},
		{"IPv4-mapped loopback in cidrs dials plain IPv4", "CONNECT [::ffff:127.0.0.1]:" + tls + " HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"upper case and trailing dot are the same name", "CONNECT MODELS.TEST.:" + tls + " HTTP/1.1\r\nHost: MODELS.TEST.:" + tls + "\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"raw UTF-8 homograph (Cyrillic o) in the target", "CONNECT m\u043edels.test:" + tls + " HTTP/1.1\r\nHost: m\u043edels.test:" + tls + "\r\n\r\n", 400, "bad-request", ""},
		{"punycode homograph", "CONNECT xn--mdels-5we.test:" + tls + " HTTP/1.1\r\nHost: xn--mdels-5we.test:" + tls + "\r\n\r\n", 403, "not-allowlisted", ""},
		{"percent-encoded dot", "CONNECT models%2Etest:" + tls + " HTTP/1.1\r\nHost: models%2Etest:" + tls + "\r\n\r\n", 400, "bad-request", ""},
		{"userinfo in the target: the authority decides", "CONNECT models.test@evil.test:" + tls + " HTTP/1.1\r\nHost: evil.test:" + tls + "\r\n\r\n", 403, "not-allowlisted", ""},
		{"Host header names an allowed host, target does not", "CONNECT evil.test:" + tls + " HTTP/1.1\r\nHost: models.test:" + tls + "\r\n\r\n", 403, "not-allowlisted", ""},
		{"CRLF injected in the target", "CONNECT models.test:" + tls + "\r\nHost: evil.test:" + tls + " HTTP/1.1\r\n\r\n", 400, "bad-request", ""},
		{"second target after a space", "CONNECT models.test:" + tls + " evil.test:" + tls + " HTTP/1.1\r\nHost: models.test\r\n\r\n", 400, "bad-request", ""},
		{"space in Host", "CONNECT models.test:" + tls + " HTTP/1.1\r\nHost: evil.test models.test\r\n\r\n", 400, "bad-request", ""},
		{"name over 253 octets", "CONNECT " + strings.Repeat(long, 5) + "test:" + tls + " HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid-host", ""},
		{"label over 63 octets", "CONNECT " + strings.Repeat("a", 64) + ".test:" + tls + " HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid-host", ""},
		{"port 0", "CONNECT models.test:0 HTTP/1.1\r\nHost: models.test:0\r\n\r\n", 400, "bad-request", ""},
		{"port 65536", "CONNECT models.test:65536 HTTP/1.1\r\nHost: models.test:65536\r\n\r\n", 400, "bad-request", ""},
		{"port 65536+tls wraps to tls", "CONNECT models.test:" + strconv.Itoa(65536+e.tlsPort) + " HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
		{"non-numeric port", "CONNECT models.test:https HTTP/1.1\r\nHost: models.test:https\r\n\r\n", 400, "bad-request", ""},
		{"no port", "CONNECT models.test HTTP/1.1\r\nHost: models.test\r\n\r\n", 400, "bad-request", ""},
		{"leading zeros: the decided port is the dialled port", "CONNECT models.test:00" + tls + " HTTP/1.1\r\nHost: x\r\n\r\n", 200, "allowed", "127.0.0.1:" + tls},
		{"self by IP literal", "CONNECT " + e.addr + " HTTP/1.1\r\nHost: " + e.addr + "\r\n\r\n", 403, "self", ""},
		{"self by name", "CONNECT self.adv.test:" + proxyPort + " HTTP/1.1\r\nHost: x\r\n\r\n", 403, "self", ""},
		{"self via IPv4-mapped literal", "CONNECT [::ffff:127.0.0.1]:" + proxyPort + " HTTP/1.1\r\nHost: x\r\n\r\n", 403, "self", ""},
		{"metadata name, upper case, trailing dot", "CONNECT METADATA.google.internal.:80 HTTP/1.1\r\nHost: x\r\n\r\n", 403, "metadata", ""},
		{"metadata name in full-width Unicode", "CONNECT \uff4d\uff45\uff54\uff41\uff44\uff41\uff54\uff41.google.internal:80 HTTP/1.1\r\nHost: x\r\n\r\n", 403, "metadata", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			c := dialFrom(t, podIP, e.addr)
			io.WriteString(c, tc.raw)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			r := e.sink.next(t) // first, so that a failed row leaves no record behind
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (record reason %q error %q)", resp.StatusCode, tc.status, r.Reason, r.Error)
			}
			// net/http's own refusals (a request line it cannot parse)
			// carry no X-Egressd-Reason; their record says so.
			byParser := strings.HasPrefix(r.Error, "request refused by the HTTP parser")
			if tc.status != 200 && !byParser && resp.Header.Get("X-Egressd-Reason") != tc.reason {
				t.Fatalf("X-Egressd-Reason %q, want %q (record %+v)", resp.Header.Get("X-Egressd-Reason"), tc.reason, r)
			}
			if r.Reason != tc.reason || r.Peer != tc.peer {
				t.Fatalf("record reason %q peer %q, want %q %q (%+v)", r.Reason, r.Peer, tc.reason, tc.peer, r)
			}
			if tc.status != 200 && e.dials.Load() != before {
				t.Fatal("a refused CONNECT dialled")
			}
			if len(r.Host) > admit.MaxHostLen {
				t.Fatalf("record host of %d octets", len(r.Host))
			}
		})
	}
	t.Run("self stays denied in audit mode", func(t *testing.T) {
		a := newEnv(t, envOpt{lookup: look, extra: advRules, self: true, mode: policy.ModeAudit})
		c, resp := a.connect(podIP, a.addr)
		c.Close()
		if resp.StatusCode != 403 || resp.Header.Get("X-Egressd-Reason") != "self" || a.dials.Load() != 0 {
			t.Fatalf("status %d reason %q dials %d", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), a.dials.Load())
		}
		a.sink.next(t)
	})
}

// TestAdversarialAbsoluteForm: the URL decides, and the origin is told the
// decided host, whatever the client wrote in Host or around the URL.
func TestAdversarialAbsoluteForm(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	look := staticLookup{"models.test": {lo}, "evil.test": {lo}, "cdn.blob.test": {lo}, "xn--bcher-kva.adv.test": {lo}}
	e := newEnv(t, envOpt{lookup: look, extra: advRules})
	hp := strconv.Itoa(e.httpPort)
	for _, tc := range []struct {
		name     string
		raw      string
		status   int
		reason   string
		seenHost string // Host the origin saw on 200
	}{
		{"userinfo names the allowed host, authority the denied one", "GET http://models.test@evil.test:" + hp + "/echo HTTP/1.1\r\nHost: models.test\r\n\r\n", 403, "not-allowlisted", ""},
		{"userinfo names the denied host", "GET http://evil.test@models.test:" + hp + "/echo HTTP/1.1\r\nHost: evil.test\r\n\r\n", 200, "allowed", "models.test:" + hp},
		{"Host header names a denied host", "GET http://models.test:" + hp + "/echo HTTP/1.1\r\nHost: evil.test\r\n\r\n", 200, "allowed", "models.test:" + hp},
		{"Host header names the allowed host, URL does not", "GET http://evil.test:" + hp + "/echo HTTP/1.1\r\nHost: models.test:" + hp + "\r\n\r\n", 403, "not-allowlisted", ""},
		{"two Host headers", "GET http://models.test:" + hp + "/echo HTTP/1.1\r\nHost: models.test\r\nHost: evil.test\r\n\r\n", 400, "bad-request", ""},
		{"upper case and trailing dot reach the origin normalized", "GET http://MODELS.TEST.:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 200, "allowed", "models.test:" + hp},
		{"percent-encoded Unicode host reaches the origin as punycode", "GET http://b%C3%BCcher.adv.test:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 200, "allowed", "xn--bcher-kva.adv.test:" + hp},
		{"percent-encoded dot", "GET http://models%2Etest:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
		{"backslash authority trick", "GET http://evil.test\\@models.test:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
		{"fragment authority trick", "GET http://evil.test#@models.test:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
		{"Connection names Host", "GET http://models.test:" + hp + "/echo HTTP/1.1\r\nHost: evil.test\r\nConnection: Host\r\n\r\n", 200, "allowed", "models.test:" + hp},
		{"CRLF in Host", "GET http://models.test:" + hp + "/echo HTTP/1.1\r\nHost: models.test\rX-Injected: 1\r\n\r\n", 400, "bad-request", ""},
		{"metadata by IP literal", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", 403, "metadata", ""},
		{"metadata by decimal IP", "GET http://2852039166/latest/meta-data/ HTTP/1.1\r\nHost: x\r\n\r\n", 403, "metadata", ""},
		{"port 0", "GET http://models.test:0/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
		{"absolute https is refused", "GET https://models.test:" + hp + "/echo HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad-request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			resp := rawRequest(t, e.addr, tc.raw)
			r := e.sink.next(t)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 200 {
				seen := <-e.seen
				if got := seen.Get("X-Seen-Host"); got != tc.seenHost {
					t.Fatalf("origin saw Host %q, want the decided %q", got, tc.seenHost)
				}
			} else if e.dials.Load() != before {
				t.Fatal("a refused request dialled")
			}
			if r.Reason != tc.reason {
				t.Fatalf("record reason %q, want %q: %+v", r.Reason, tc.reason, r)
			}
		})
	}
	t.Run("client-sent forwarding and proxy headers do not reach the origin", func(t *testing.T) {
		resp := rawRequest(t, e.addr, "GET http://models.test:"+hp+"/echo HTTP/1.1\r\nHost: models.test\r\n"+
			"X-Forwarded-For: 169.254.169.254\r\nForwarded: for=1.2.3.4\r\nProxy-Authorization: Basic UFJPWFlTRUNSRVQ=\r\n"+
			"Connection: X-Keep\r\nX-Keep: 1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		seen := <-e.seen
		for _, h := range []string{"X-Forwarded-For", "Proxy-Authorization", "X-Keep"} {
			if v := seen.Get(h); v != "" {
				t.Errorf("origin saw %s: %q", h, v)
			}
		}
		e.sink.next(t)
		if bytes.Contains(e.sink.bytes(), []byte("UFJPWFlTRUNSRVQ")) {
			t.Fatal("Proxy-Authorization in the audit log")
		}
	})
	t.Run("redirect Location with credentials stays out of the audit log", func(t *testing.T) {
		resp := rawRequest(t, e.addr, "GET http://models.test:"+hp+"/redirect?to=http://user:LOCSECRET@cdn.blob.test/x%3Fsig%3DQSECRET HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != 302 {
			t.Fatal(resp.Status)
		}
		r := e.sink.next(t)
		if r.HTTP == nil || r.HTTP.RedirectHost != "cdn.blob.test" {
			t.Fatalf("http %+v", r.HTTP)
		}
		for _, s := range []string{"LOCSECRET", "QSECRET", "user:"} {
			if bytes.Contains(e.sink.bytes(), []byte(s)) {
				t.Errorf("%s in the audit log", s)
			}
		}
	})
}

// TestAdversarialSmuggling: requests whose body length two parsers could
// read differently are refused before any dial, and pipelined requests on
// one connection are each decided.
func TestAdversarialSmuggling(t *testing.T) {
	e := newEnv(t, envOpt{})
	h := fmt.Sprintf("models.test:%d", e.httpPort)
	head := "POST http://" + h + "/echo HTTP/1.1\r\nHost: " + h + "\r\n"
	for _, tc := range []struct {
		name string
		raw  string
	}{
		{"TE chunked, identity", head + "Transfer-Encoding: chunked, identity\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"TE identity, chunked", head + "Transfer-Encoding: identity, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"TE xchunked", head + "Transfer-Encoding: xchunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"TE chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"TE with a vertical tab", head + "Transfer-Encoding:\vchunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"TE header name with a space before the colon", head + "Transfer-Encoding : chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"two different Content-Lengths in one field", head + "Content-Length: 3, 4\r\n\r\nabcd"},
		{"signed Content-Length", head + "Content-Length: +3\r\n\r\nabc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			resp := rawRequest(t, e.addr, tc.raw)
			r := e.sink.next(t)
			if resp.StatusCode < 400 {
				// Accepted: then the origin must have seen exactly one
				// well-framed body, which net/http re-frames itself.
				seen := <-e.seen
				if b := seen.Get("X-Seen-Body"); b != "abc" {
					t.Fatalf("status %d, origin saw body %q", resp.StatusCode, b)
				}
				return
			}
			if e.dials.Load() != before {
				t.Fatal("a refused request dialled")
			}
			if r.Reason != "bad-request" || r.Verdict != "deny" {
				t.Fatalf("record %+v", r)
			}
		})
	}

	t.Run("TE on HTTP/1.0 is refused, and nothing after it is read", func(t *testing.T) {
		// RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is
		// faulty framing. net/http let Content-Length frame it; egressd
		// refuses it and closes, so no second request hides in it.
		c := dialFrom(t, podIP, e.addr)
		io.WriteString(c, "POST http://"+h+"/echo HTTP/1.0\r\nHost: "+h+"\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"+
			"3\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		r := e.sink.next(t)
		if resp.StatusCode != 400 || r.Reason != "bad-request" || r.Host != "models.test" {
			t.Fatalf("status %d record %+v", resp.StatusCode, r)
		}
		if _, err := http.ReadResponse(br, nil); err == nil {
			t.Fatal("a second response")
		}
		select {
		case l := <-e.sink.lines:
			t.Fatalf("second record %s", l)
		default:
		}
	})

	t.Run("pipelined requests on the transparent listener are each decided", func(t *testing.T) {
		ln := listen(t, "127.0.0.1:0")
		go e.p.ServeTransparentHTTP(ln, e.httpPort)
		c := dialFrom(t, podIP, ln.Addr().String())
		// One write: an allowed request whose body "contains" a request
		// for a denied host, then that request for real, then an
		// absolute-form request whose Host header is allowed.
		smuggled := "GET /echo HTTP/1.1\r\nHost: evil.test\r\n\r\n"
		io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: models.test\r\nContent-Length: "+strconv.Itoa(len(smuggled))+"\r\n\r\n"+smuggled+
			smuggled+
			"GET http://evil.test/echo HTTP/1.1\r\nHost: models.test\r\n\r\n")
		br := bufio.NewReader(c)
		for i, want := range []struct {
			status int
			reason string
		}{{200, "allowed"}, {403, "not-allowlisted"}, {403, "not-allowlisted"}} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r := e.sink.next(t)
			if resp.StatusCode != want.status || r.Reason != want.reason {
				t.Fatalf("response %d: status %d reason %q, want %d %q", i, resp.StatusCode, r.Reason, want.status, want.reason)
			}
			if want.status == 200 {
				if seen := <-e.seen; seen.Get("X-Seen-Body") != smuggled || seen.Get("X-Seen-Host") != "models.test:"+strconv.Itoa(e.httpPort) {
					t.Fatalf("origin saw %q for %q", seen.Get("X-Seen-Body"), seen.Get("X-Seen-Host"))
				}
			}
		}
	})
}
