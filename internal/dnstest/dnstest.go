// Package dnstest holds the test doubles of the DNS packages (resolver,
// dnsserver): a real miekg/dns server on 127.0.0.1 playing the upstream or
// the cluster DNS, and an injectable clock. It is imported by tests and
// bench/ only (internal/archtest holds that line).
package dnstest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Upstream is a real DNS server on 127.0.0.1 (UDP and TCP on one port)
// that answers from a small zone (Zone) and counts what it is asked.
type Upstream struct {
	// Addr is "127.0.0.1:port", UDP and TCP.
	Addr string
	// Total counts every query received.
	Total atomic.Int64
	// Failing makes every answer SERVFAIL.
	Failing atomic.Bool

	mu     sync.Mutex
	rrs    map[string][]dns.RR // "name./TYPE" -> answer
	nx     map[string]bool
	counts map[string]int // "name./TYPE/udp|tcp"
	// nxUnknown answers NXDOMAIN for names with no record at all, as the
	// cluster DNS does for its own zone.
	nxUnknown bool
	// refuse holds the keys answered REFUSED (Refuse).
	refuse map[string]bool
	// gate, when set, holds every answer until it is closed; arrived gets
	// one value per query that reached the gate.
	gate    chan struct{}
	arrived chan string
}

// SOA returns a SOA record of zone for negative answers.
func SOA(zone string, ttl, minttl uint32) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minttl}
}

// MustRR parses one record in zone-file syntax; it panics on test data
// that does not parse.
func MustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err) // test data only
	}
	return rr
}

// Zone is what every Upstream serves at start, keyed "name./TYPE", and
// the names it answers NXDOMAIN.
func Zone() (map[string][]dns.RR, map[string]bool) {
	z := map[string][]dns.RR{}
	add := func(key string, rrs ...string) {
		for _, s := range rrs {
			z[key] = append(z[key], MustRR(s))
		}
	}
	add("models.test./A", "models.test. 300 IN A 203.0.113.10")
	add("models.test./AAAA", "models.test. 300 IN AAAA 2001:db8::10")
	add("models.test./HTTPS", "models.test. 300 IN HTTPS 1 . alpn=h2")
	add("models.test./TXT", "models.test. 60 IN TXT \"v=1\"")
	add("x.blob.test./A", "x.blob.test. 120 IN CNAME edge.example.net.", "edge.example.net. 60 IN A 203.0.113.20")
	add("x.blob.test./AAAA", "x.blob.test. 120 IN CNAME edge.example.net.")
	// An upstream that stops at the CNAME: LookupIP must ask for the target.
	add("half.blob.test./A", "half.blob.test. 120 IN CNAME edge.example.net.")
	add("edge.example.net./A", "edge.example.net. 60 IN A 203.0.113.20")
	add("loop1.blob.test./A", "loop1.blob.test. 60 IN CNAME loop2.blob.test.", "loop2.blob.test. 60 IN CNAME loop1.blob.test.")
	add("meta.blob.test./A", "meta.blob.test. 60 IN A 169.254.169.254")
	add("mixed.blob.test./A", "mixed.blob.test. 60 IN A 169.254.169.254", "mixed.blob.test. 60 IN A 203.0.113.30")
	add("evil.test./A", "evil.test. 60 IN A 203.0.113.66")
	for i := 0; i < 100; i++ {
		add("big.blob.test./A", fmt.Sprintf("big.blob.test. 300 IN A 203.0.113.%d", i+1))
	}
	// nodata.blob.test exists with no address: NOERROR + SOA.
	add("nodata.blob.test./TXT", "nodata.blob.test. 60 IN TXT \"x\"")
	return z, map[string]bool{"nx.blob.test.": true}
}

// NewUpstream starts an Upstream serving Zone; it stops at the end of the
// test.
func NewUpstream(t testing.TB) *Upstream {
	t.Helper()
	z, nx := Zone()
	u := &Upstream{rrs: z, nx: nx, counts: map[string]int{}}
	pc, ln := ListenPair(t)
	u.Addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: u}, {Listener: ln, Handler: u}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return u
}

// Set replaces the answer for key ("name./TYPE") with rrs in zone-file
// syntax, in this order, whatever their owner names.
func (u *Upstream) Set(key string, rrs ...string) {
	out := make([]dns.RR, 0, len(rrs))
	for _, s := range rrs {
		out = append(out, MustRR(s))
	}
	u.mu.Lock()
	u.rrs[key] = out
	u.mu.Unlock()
}

// NXUnknown makes names without any record NXDOMAIN (the cluster DNS for
// its own zone); otherwise they are NODATA.
func (u *Upstream) NXUnknown() {
	u.mu.Lock()
	u.nxUnknown = true
	u.mu.Unlock()
}

// Gate holds every answer until release is called, after which answers
// flow again; arrived receives the key of each query that reached the
// gate (buffer n).
func (u *Upstream) Gate(n int) (release func(), arrived <-chan string) {
	g, a := make(chan struct{}), make(chan string, n)
	u.mu.Lock()
	u.gate, u.arrived = g, a
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			u.gate = nil
			u.mu.Unlock()
			close(g)
		})
	}, a
}

// ListenPair returns a UDP socket and a TCP listener on the same
// 127.0.0.1 port.
func ListenPair(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for i := 0; i < 20; i++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal("no free UDP+TCP port pair")
	return nil, nil
}

// ServeDNS implements dns.Handler.
func (u *Upstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	u.Total.Add(1)
	q := r.Question[0]
	k := strings.ToLower(q.Name) + "/" + dns.TypeToString[q.Qtype]
	u.mu.Lock()
	u.counts[k+"/"+w.LocalAddr().Network()]++
	gate, arrived := u.gate, u.arrived
	u.mu.Unlock()
	if gate != nil {
		arrived <- k
		<-gate
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	switch {
	case u.Failing.Load():
		m.Rcode = dns.RcodeServerFailure
	case u.refused(k):
		m.Rcode = dns.RcodeRefused
	case u.nx[strings.ToLower(q.Name)]:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{SOA("blob.test.", 3600, 60)}
	default:
		u.mu.Lock()
		m.Answer = append(m.Answer, u.rrs[k]...)
		nxUnknown := u.nxUnknown
		u.mu.Unlock()
		if len(m.Answer) == 0 {
			m.Ns = []dns.RR{SOA("test.", 3600, 120)}
			if nxUnknown && !u.exists(strings.ToLower(q.Name)) {
				m.Rcode = dns.RcodeNameError
			}
		}
	}
	size := dns.MaxMsgSize
	if w.LocalAddr().Network() == "udp" {
		size = dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = int(o.UDPSize())
			m.SetEdns0(o.UDPSize(), false)
		}
	}
	m.Truncate(size)
	w.WriteMsg(m)
}

// Refuse makes the answers for key ("name./TYPE") REFUSED, as some
// servers answer a type they do not serve (AAAA from a hosts file).
func (u *Upstream) Refuse(key string) {
	u.mu.Lock()
	if u.refuse == nil {
		u.refuse = map[string]bool{}
	}
	u.refuse[key] = true
	u.mu.Unlock()
}

func (u *Upstream) refused(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.refuse[key]
}

func (u *Upstream) exists(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range u.rrs {
		if strings.HasPrefix(k, name+"/") {
			return true
		}
	}
	return false
}

// Count returns how many queries for (name, qtype) arrived over network
// ("udp" or "tcp"); name is lower case and fully qualified.
func (u *Upstream) Count(name, qtype, network string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[name+"/"+qtype+"/"+network]
}

// ClosedAddr returns a 127.0.0.1 UDP address nobody listens on: a query
// there fails at once with "connection refused" (ICMP port unreachable).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().String()
	pc.Close()
	return a
}

// Clock is an injectable clock for TTL tests.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
