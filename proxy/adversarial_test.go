package proxy

// Adversarial tests: an attacker inside a pod tries to get past the egress
// boundary. Each table row names the attack; a row fails when the attack
// works. No packet leaves the host: the dial hook of newEnv refuses every
// non-loopback address, and the tests also check that none was asked for.

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/metrics"
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
