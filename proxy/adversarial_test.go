package proxy

// Adversarial tests: an attacker inside a pod tries to get past the egress
// boundary. Each table row names the attack; a row fails when the attack
// works. No packet leaves the host: the dial hook of newEnv refuses every
// non-loopback address, and the tests also check that none was asked for.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// advRules open **.adv.test on both origin ports inside 127.0.0.0/8 (the
// stand-in for a "public" range), and the proxy's own port for self tests.
// An address rule (cidrs, no hosts) opens IP literals there.
const advRules = `  - hosts: ["**.adv.test"]
    ports: [{tls}, {http}]
    cidrs: ["127.0.0.0/8"]
  - hosts: ["self.adv.test"]
    ports: [{proxy}]
    cidrs: ["127.0.0.0/8"]
  - cidrs: ["127.0.0.0/8"]
    ports: [{tls}, {proxy}]
`

// nonLoopbackDials returns every dialled address that is not loopback
// (the hook refuses them, but asking is already a failure).
func (e *env) nonLoopbackDials() []string {
	var out []string
	e.dialAddrs.Range(func(k, _ any) bool {
		if !netip.MustParseAddrPort(k.(string)).Addr().IsLoopback() {
			out = append(out, k.(string))
		}
		return true
	})
	return out
}

// rebindDNS is an upstream DNS server whose answers change per query: the
// n-th A query for a name gets seq[name][min(n, len-1)], with TTL 0 so that
// nothing is cached (the rebinding attacker's choice).
type rebindDNS struct {
	mu    sync.Mutex
	a     map[string][]string // name. -> per-query answer (A or CNAME chain in RR text)
	aaaa  map[string]string
	asked map[string]int
}

func (d *rebindDNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	name := strings.ToLower(q.Question[0].Name)
	d.mu.Lock()
	var rrs string
	switch q.Question[0].Qtype {
	case dns.TypeA:
		seq := d.a[name]
		if len(seq) > 0 {
			rrs = seq[min(d.asked[name], len(seq)-1)]
		}
		d.asked[name]++
	case dns.TypeAAAA:
		rrs = d.aaaa[name]
	}
	d.mu.Unlock()
	for _, s := range strings.Split(rrs, ";") {
		if s = strings.TrimSpace(s); s != "" {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err) // test data only
			}
			m.Answer = append(m.Answer, rr)
		}
	}
	if len(m.Answer) == 0 {
		soa, _ := dns.NewRR("test. 0 IN SOA ns.test. host.test. 1 60 60 60 0")
		m.Ns = append(m.Ns, soa)
	}
	w.WriteMsg(m)
}

func (d *rebindDNS) count(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[name]
}

func startRebindDNS(t *testing.T, d *rebindDNS) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: d, NotifyStartedFunc: func() { close(started) }}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestAdversarialDNSAnswers: the attacker controls the authoritative DNS of
// an allowed name. Whatever it answers, the proxy dials only an address it
// checked, and never one of the never class.
func TestAdversarialDNSAnswers(t *testing.T) {
	d := &rebindDNS{asked: map[string]int{}, a: map[string][]string{
		"rebind.adv.test.": {
			"rebind.adv.test. 0 IN A 127.0.0.1",
			"rebind.adv.test. 0 IN A 169.254.169.254",
		},
		"mixed.adv.test.":      {"mixed.adv.test. 0 IN A 169.254.169.254; mixed.adv.test. 0 IN A 169.254.1.1; mixed.adv.test. 0 IN A 127.0.0.1"},
		"cname-meta.adv.test.": {"cname-meta.adv.test. 0 IN CNAME metadata.google.internal.; metadata.google.internal. 0 IN A 169.254.169.254"},
		"cname-ll.adv.test.":   {"cname-ll.adv.test. 0 IN CNAME a.attacker.example.; a.attacker.example. 0 IN CNAME b.attacker.example.; b.attacker.example. 0 IN A 169.254.7.7"},
		"alibaba.adv.test.":    {"alibaba.adv.test. 0 IN A 100.100.100.200"},
		"azure.adv.test.":      {"azure.adv.test. 0 IN A 168.63.129.16"},
		"zero.adv.test.":       {"zero.adv.test. 0 IN A 0.0.0.0"},
		"bcast.adv.test.":      {"bcast.adv.test. 0 IN A 255.255.255.255"},
		"mcast.adv.test.":      {"mcast.adv.test. 0 IN A 224.0.0.251"},
	}, aaaa: map[string]string{
		"mapped.adv.test.":    "mapped.adv.test. 0 IN AAAA ::ffff:169.254.169.254",
		"nat64.adv.test.":     "nat64.adv.test. 0 IN AAAA 64:ff9b::a9fe:a9fe",
		"nat64l.adv.test.":    "nat64l.adv.test. 0 IN AAAA 64:ff9b:1:a9fe:a9:fe00::",
		"sixtofour.adv.test.": "sixtofour.adv.test. 0 IN AAAA 2002:a9fe:a9fe::1",
		"teredo.adv.test.":    "teredo.adv.test. 0 IN AAAA 2001:0:4136:e378:8000:63bf:5601:5601",
		"compat.adv.test.":    "compat.adv.test. 0 IN AAAA ::a9fe:a9fe",
		"imds6.adv.test.":     "imds6.adv.test. 0 IN AAAA fd00:ec2::254",
		"ll6.adv.test.":       "ll6.adv.test. 0 IN AAAA fe80::1",
	}}
	addr := startRebindDNS(t, d)
	res, err := resolver.New(resolver.Config{Upstreams: []string{addr}, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpt{lookup: res, extra: advRules})
	port := strconv.Itoa(e.tlsPort)
	for _, tc := range []struct {
		name   string
		host   string
		status int
		reason string
		peer   string // wanted peer on 200
	}{
		{"rebind: first answer is in the rule's cidrs", "rebind.adv.test", 200, "allowed", "127.0.0.1:" + port},
		{"rebind: the next answer (TTL 0) is the metadata address", "rebind.adv.test", 403, "metadata", ""},
		{"answer mixes never-class and allowed addresses", "mixed.adv.test", 200, "allowed", "127.0.0.1:" + port},
		{"CNAME chain ends at a metadata name", "cname-meta.adv.test", 403, "metadata", ""},
		{"CNAME chain ends in 169.254/16", "cname-ll.adv.test", 403, "link-local", ""},
		{"Alibaba metadata address", "alibaba.adv.test", 403, "metadata", ""},
		{"Azure WireServer (a public address)", "azure.adv.test", 403, "metadata", ""},
		{"unspecified 0.0.0.0 (reaches the local host)", "zero.adv.test", 403, "reserved-address", ""},
		{"broadcast", "bcast.adv.test", 403, "reserved-address", ""},
		{"multicast", "mcast.adv.test", 403, "reserved-address", ""},
		{"AAAA IPv4-mapped metadata", "mapped.adv.test", 403, "metadata", ""},
		{"AAAA NAT64 well-known prefix metadata", "nat64.adv.test", 403, "metadata", ""},
		{"AAAA NAT64 local-use /48 metadata", "nat64l.adv.test", 403, "metadata", ""},
		{"AAAA 6to4 metadata", "sixtofour.adv.test", 403, "metadata", ""},
		{"AAAA Teredo metadata", "teredo.adv.test", 403, "metadata", ""},
		{"AAAA IPv4-compatible metadata", "compat.adv.test", 403, "metadata", ""},
		{"AAAA AWS IMDS over IPv6", "imds6.adv.test", 403, "metadata", ""},
		{"AAAA link-local", "ll6.adv.test", 403, "link-local", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := d.count(tc.host + ".")
			c, resp := e.connect(podIP, tc.host+":"+port)
			c.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("X-Egressd-Reason") != strings.TrimPrefix(tc.reason, "allowed") {
				t.Fatalf("status %d reason %q, want %d %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), tc.status, tc.reason)
			}
			r := e.sink.next(t)
			if r.Reason != tc.reason || r.Peer != tc.peer {
				t.Fatalf("record reason %q peer %q, want %q %q", r.Reason, r.Peer, tc.reason, tc.peer)
			}
			if tc.status == 200 && (r.DNS == nil || len(r.DNS.Answers) == 0) {
				t.Fatalf("record without the answer it checked: %+v", r.DNS)
			}
			// One lookup per request: a second one between check and
			// dial is exactly the rebinding window.
			if got := d.count(tc.host+".") - asked; got > 1 {
				t.Fatalf("%d A queries for one request", got)
			}
			if bad := e.nonLoopbackDials(); len(bad) > 0 {
				t.Fatalf("dialled %v", bad)
			}
		})
	}
}

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
			if len(r.Host) > maxHostLen {
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

// helloWithSNI returns a real ClientHello (Go's, no SNI) with a
// server_name extension of raw bytes added.
func helloWithSNI(t *testing.T, ext []byte) []byte {
	t.Helper()
	return withExtension(captureClientHello(t, "", []string{"http/1.1"}), extServerName, ext)
}

// TestAdversarialTunnelHello: what the pod sends first in an admitted
// CONNECT tunnel to models.test. Relayed: the origin answered (bytes came
// back); refused: the tunnel closed without a byte from the origin.
func TestAdversarialTunnelHello(t *testing.T) {
	e := newEnv(t, envOpt{})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	evil := captureClientHello(t, "evil.test", nil)
	two := binary.BigEndian.AppendUint16(nil, uint16(2*3+len("models.test")+len("evil.test")))
	for _, n := range []string{"models.test", "evil.test"} {
		two = append(two, 0)
		two = binary.BigEndian.AppendUint16(two, uint16(len(n)))
		two = append(two, n...)
	}
	padded := withExtension(captureClientHello(t, "models.test", nil), 21, make([]byte, 40<<10)) // RFC 7685 padding
	ech := withExtension(captureClientHello(t, "models.test", nil), 0xfe0d, bytes.Repeat([]byte{0xec}, 200))
	for _, tc := range []struct {
		name    string
		send    []byte
		chunk   int // write in pieces of this size; 0: one write
		relayed bool
		reason  string
		result  string // tls.result in the record; "" not checked
		allow   bool   // verdict allow although nothing came back
	}{
		{"SNI differs only by case", helloWithSNI(t, sniExt("Models.TEST")), 0, true, "allowed", "", false},
		{"SNI with a trailing dot", helloWithSNI(t, sniExt("models.test.")), 0, true, "allowed", "", false},
		{"SNI is another host", evil, 0, false, "sni-mismatch", "", false},
		{"SNI is an IP literal", helloWithSNI(t, sniExt("127.0.0.1")), 0, false, "sni-mismatch", "", false},
		{"SNI with an embedded NUL", helloWithSNI(t, sniExt("models.test\x00.evil.test")), 0, false, "sni-mismatch", "", false},
		{"two host_name entries", helloWithSNI(t, two), 0, false, "bad-request", "", false},
		{"two server_name extensions", withExtension(captureClientHello(t, "models.test", nil), extServerName, sniExt("evil.test")), 0, false, "bad-request", "", false},
		{"mismatching hello in 7-byte records, 1-byte segments", fragment(evil, 7), 1, false, "sni-mismatch", "", false},
		{"matching hello in 7-byte records, 3-byte segments", fragment(captureClientHello(t, "models.test", nil), 7), 3, true, "allowed", "", false},
		{"hello larger than the peek bound", fragment(padded, 1<<14), 0, false, "bad-request", "", false},
		{"alert record before a mismatching hello", append([]byte{21, 3, 3, 0, 2, 1, 90}, evil...), 0, false, "bad-request", "", false},
		{"ChangeCipherSpec before a mismatching hello", append([]byte{20, 3, 3, 0, 1, 1}, evil...), 0, false, "bad-request", "", false},
		// ECH (draft-ietf-tls-esni): egressd sees the outer SNI only, the
		// name of the client-facing server it decided; the inner name,
		// encrypted to that server, may be any of its tenants. Refused
		// unless a rule says ech: allow (TestECH has the real handshake).
		{"ECH-like extension with the right outer SNI", ech, 0, false, "ech", "", false},
		// Not TLS: relayed to the decided address as not-tls (SSH, plain
		// HTTP through CONNECT). A TLS hello after other bytes is no
		// handshake a TLS server accepts.
		{"non-TLS bytes first, then a mismatching hello", append([]byte("\x00\x00\r\n"), evil...), 0, false, "allowed", "not-tls", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			go func() {
				if tc.chunk == 0 {
					c.Write(tc.send)
					return
				}
				for b := tc.send; len(b) > 0; b = b[min(tc.chunk, len(b)):] {
					if _, err := c.Write(b[:min(tc.chunk, len(b))]); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			n, _ := c.Read(make([]byte, 1))
			c.Close()
			r := e.sink.next(t)
			if got := n > 0; got != tc.relayed {
				t.Fatalf("relayed %v, want %v", got, tc.relayed)
			}
			if r.Reason != tc.reason || (r.Verdict == "allow") != (tc.relayed || tc.allow) {
				t.Fatalf("record verdict %q reason %q error %q, want reason %q", r.Verdict, r.Reason, r.Error, tc.reason)
			}
			if tc.result != "" && (r.TLS == nil || r.TLS.Result != tc.result) {
				t.Fatalf("record tls %+v, want result %q", r.TLS, tc.result)
			}
		})
	}
	for _, v := range []struct {
		name    string
		version uint16
		want    string
	}{{"TLS 1.2 client", tls.VersionTLS12, "TLS1.2"}, {"TLS 1.3 client", tls.VersionTLS13, "TLS1.3"}} {
		t.Run(v.name, func(t *testing.T) {
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			tc := tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool(), MaxVersion: v.version})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			tc.Close()
			r := e.sink.next(t)
			if r.TLS == nil || r.TLS.Version != v.want || r.TLS.Result != "established" || r.Reason != "allowed" {
				t.Fatalf("record tls %+v reason %q", r.TLS, r.Reason)
			}
		})
	}
}

// TestAdversarialSNIListener: the transparent TLS listener, where the SNI
// is all there is.
func TestAdversarialSNIListener(t *testing.T) {
	e := newEnv(t, envOpt{peekTimeout: 300 * time.Millisecond})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeSNI(ln, e.tlsPort)
	hello := captureClientHello(t, "models.test", nil)
	for _, tc := range []struct {
		name    string
		src     string
		send    []byte
		relayed bool
		reason  string
	}{
		{"nothing sent: cut at the peek timeout", podIP, nil, false, "no-sni"},
		{"half a hello, then silence: cut at the peek timeout", podIP, hello[:len(hello)/2], false, "no-sni"},
		{"hello larger than the peek bound", podIP, fragment(withExtension(hello, 21, make([]byte, 40<<10)), 1<<14), false, "no-sni"},
		{"two host_name entries", podIP, helloWithSNI(t, append(binary.BigEndian.AppendUint16(nil, 26), append(append([]byte{0, 0, 11}, "models.test"...), append([]byte{0, 0, 9}, "evil.test"...)...)...)), false, "no-sni"},
		{"alert record, then a hello", podIP, append([]byte{21, 3, 3, 0, 2, 1, 90}, hello...), false, "no-sni"},
		{"SNI names the metadata host", podIP, helloWithSNI(t, sniExt("metadata.google.internal")), false, "metadata"},
		{"SNI is the metadata address", podIP, helloWithSNI(t, sniExt("169.254.169.254")), false, "metadata"},
		{"SNI is not a valid name", podIP, helloWithSNI(t, sniExt("models.test/evil")), false, "invalid-host"},
		{"SNI with upper case and a trailing dot", podIP, helloWithSNI(t, sniExt("MODELS.test.")), true, "allowed"},
		{"unknown client: nothing is read", nobody, hello, false, "unknown-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			c := dialFrom(t, tc.src, ln.Addr().String())
			if tc.send != nil {
				go c.Write(tc.send)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			n, _ := c.Read(make([]byte, 1))
			c.Close()
			r := e.sink.next(t)
			if got := n > 0; got != tc.relayed {
				t.Fatalf("relayed %v, want %v", got, tc.relayed)
			}
			if r.Kind != record.KindSNI || r.Reason != tc.reason {
				t.Fatalf("record kind %q reason %q error %q, want %q", r.Kind, r.Reason, r.Error, tc.reason)
			}
			if !tc.relayed && e.dials.Load() != before {
				t.Fatal("a refused connection dialled")
			}
		})
	}
}

// TestAdversarialExhaustion: slow or many connections from one pod are
// bounded and do not starve other pods.
func TestAdversarialExhaustion(t *testing.T) {
	t.Run("slowloris: a trickled header is cut by the header timeout", func(t *testing.T) {
		e := newEnv(t, envOpt{headerTimeout: 200 * time.Millisecond})
		c := dialFrom(t, podIP, e.addr)
		io.WriteString(c, "GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-A: 1\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the proxy kept a trickling client open")
		}
		if e.dials.Load() != 0 {
			t.Fatal("dialled")
		}
	})

	t.Run("connections per client are bounded, other clients are served", func(t *testing.T) {
		e := newEnv(t, envOpt{maxConns: 3})
		ln := listen(t, "127.0.0.1:0")
		go e.p.ServeSNI(ln, e.tlsPort)
		target := fmt.Sprintf("models.test:%d", e.tlsPort)
		var open []net.Conn
		for range 3 {
			c, resp := e.connect(podIP, target) // tunnels, idle: each holds a slot
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			open = append(open, c)
		}
		// Refused connections are counted, not recorded one by one: a
		// summary per client, kind and second (Flush stands for the
		// second passing).
		const extra = 5
		for _, tc := range []struct {
			name string
			run  func() error
		}{
			{"more proxy connections get 429", func() error {
				for range extra {
					c := dialFrom(t, podIP, e.addr)
					fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
					resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
					if err != nil {
						return err
					}
					if resp.StatusCode != 429 || resp.Header.Get("X-Egressd-Reason") != "rate-limited" {
						return fmt.Errorf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
					}
				}
				return nil
			}},
			{"more SNI connections are closed unread", func() error {
				for range extra {
					c := dialFrom(t, podIP, ln.Addr().String())
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if n, _ := c.Read(make([]byte, 1)); n != 0 {
						return fmt.Errorf("read %d bytes", n)
					}
				}
				return nil
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if err := tc.run(); err != nil {
					t.Fatal(err)
				}
			})
		}
		t.Run("one summary record per kind", func(t *testing.T) {
			e.p.overLimit.Flush()
			kinds := map[string]record.Record{}
			for range 2 {
				r := e.sink.next(t)
				kinds[r.Kind] = r
			}
			for _, kind := range []string{record.KindHTTP, record.KindSNI} {
				r := kinds[kind]
				if r.Verdict != "deny" || r.Reason != "rate-limited" || r.Outcome != record.OutcomeRefused || r.Count != extra || r.Client.Pod != "llm-0" {
					t.Fatalf("%s summary %+v", kind, r)
				}
			}
			if kinds[record.KindHTTP].HTTP == nil || kinds[record.KindHTTP].HTTP.Status != 429 {
				t.Fatalf("http summary %+v", kinds[record.KindHTTP].HTTP)
			}
		})
		t.Run("another client is still served", func(t *testing.T) {
			c, resp := e.connect(otherIP, target)
			c.Close()
			if resp.StatusCode != 403 || resp.Header.Get("X-Egressd-Reason") != "not-allowlisted" {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			e.sink.next(t)
		})
		t.Run("a closed tunnel frees its slot", func(t *testing.T) {
			open[0].Close()
			if r := e.sink.next(t); r.Verdict != "allow" {
				t.Fatalf("record %+v", r)
			}
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d after a slot was freed", resp.StatusCode)
			}
			c.Close()
			e.sink.next(t)
		})
		for _, c := range open[1:] {
			c.Close()
			e.sink.next(t)
		}
		t.Run("every slot is back", func(t *testing.T) {
			if n := e.p.limit.Open(netip.MustParseAddr(podIP)); n != 0 {
				t.Fatalf("slots still held: %d", n)
			}
		})
	})

	t.Run("limit defaults", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			set  int
			want int
		}{{"zero means 1024", 0, 1024}, {"negative means no limit", -1, -1}, {"explicit", 7, 7}} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := Config{MaxConnsPerClient: tc.set}.withDefaults()
				if cfg.MaxConnsPerClient != tc.want {
					t.Fatalf("got %d", cfg.MaxConnsPerClient)
				}
				l := limit.NewConns(cfg.MaxConnsPerClient)
				src := netip.MustParseAddr(podIP)
				for i := range 1100 {
					if l.Acquire(src) == nil {
						if tc.want < 0 || i != tc.want {
							t.Fatalf("refused at %d", i)
						}
						return
					}
				}
				if tc.want >= 0 {
					t.Fatal("never refused")
				}
			})
		}
	})
}
