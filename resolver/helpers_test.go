package resolver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/metrics"
	"github.com/egressd/egressd/policy"
)

// fakeUpstream is a real DNS server on 127.0.0.1 (UDP and TCP on one port)
// that answers from a small zone and counts what it is asked.
type fakeUpstream struct {
	addr string

	mu      sync.Mutex
	rrs     map[string][]dns.RR // "name./TYPE" -> answer
	nx      map[string]bool
	counts  map[string]int // "name./TYPE/udp|tcp"
	total   atomic.Int64
	failing atomic.Bool // answer SERVFAIL
	// nxUnknown answers NXDOMAIN for names with no record at all, as the
	// cluster DNS does for its own zone.
	nxUnknown bool
	// gate, when set, holds every answer until it is closed; arrived gets
	// one value per query that reached the gate.
	gate    chan struct{}
	arrived chan string
}

func soa(zone string, ttl, minttl uint32) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minttl}
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err) // test data only
	}
	return rr
}

// testZone is what every fake upstream serves.
func testZone() (map[string][]dns.RR, map[string]bool) {
	z := map[string][]dns.RR{}
	add := func(key string, rrs ...string) {
		for _, s := range rrs {
			z[key] = append(z[key], mustRR(s))
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

func newFakeUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	z, nx := testZone()
	u := &fakeUpstream{rrs: z, nx: nx, counts: map[string]int{}}
	pc, ln := listenPair(t)
	u.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: u}, {Listener: ln, Handler: u}} {
		srv := srv
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return u
}

// listenPair returns a UDP socket and a TCP listener on the same
// 127.0.0.1 port.
func listenPair(t testing.TB) (net.PacketConn, net.Listener) {
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

func (u *fakeUpstream) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	u.total.Add(1)
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
	case u.failing.Load():
		m.Rcode = dns.RcodeServerFailure
	case u.nx[strings.ToLower(q.Name)]:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa("blob.test.", 3600, 60)}
	default:
		u.mu.Lock()
		m.Answer = append(m.Answer, u.rrs[k]...)
		u.mu.Unlock()
		if len(m.Answer) == 0 {
			m.Ns = []dns.RR{soa("test.", 3600, 120)}
			u.mu.Lock()
			nxUnknown := u.nxUnknown
			u.mu.Unlock()
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

func (u *fakeUpstream) exists(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k := range u.rrs {
		if strings.HasPrefix(k, name+"/") {
			return true
		}
	}
	return false
}

func (u *fakeUpstream) count(name, qtype, network string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[name+"/"+qtype+"/"+network]
}

// closedAddr returns a 127.0.0.1 UDP address nobody listens on: a query
// there fails at once with "connection refused" (ICMP port unreachable).
func closedAddr(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().String()
	pc.Close()
	return a
}

// clock is an injectable clock for TTL tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestResolver(t testing.TB, cfg Config) *Resolver {
	t.Helper()
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const testPolicy = `
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm}}
  egress:
  - hosts: ["models.test"]
    ports: [443]
    purpose: model weights
  - hosts: ["**.blob.test"]
    ports: [443]
`

func compilePolicy(t testing.TB) *policy.Snapshot {
	t.Helper()
	snap, err := testutil.Snapshot(testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// testPods: 127.0.0.2 is an llm pod the policy selects, 127.0.0.3 a pod of
// another namespace no policy selects; 127.0.0.9 is nobody.
func testPods() *identity.Store {
	s := identity.NewStore()
	s.Replace([]*corev1.Pod{
		testutil.RunningPod("llm-prod", "llm-0", "sa", "127.0.0.2", map[string]string{"app": "llm"}),
		testutil.RunningPod("other", "web-0", "sa", "127.0.0.3", map[string]string{"app": "web"}),
	})
	return s
}

// auditSink collects audit lines.
type auditSink struct{ testutil.SyncBuffer }

func (a *auditSink) records(t *testing.T) []audit.Record {
	t.Helper()
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(a.String())), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// last returns the last record for host.
func (a *auditSink) last(t *testing.T, host string) audit.Record {
	t.Helper()
	rs := a.records(t)
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Host == host {
			return rs[i]
		}
	}
	t.Fatalf("no audit record for %q in %d records", host, len(rs))
	return audit.Record{}
}

// fixture is a DNS server on 127.0.0.1 with a fake upstream, fake cluster
// DNS, the test policy and the test pods.
type fixture struct {
	srv      *Server
	res      *Resolver
	up       *fakeUpstream
	cluster  *fakeUpstream
	addr     string
	audit    *auditSink
	clock    *clock
	metrics  *metrics.Metrics
	snapshot atomic.Pointer[policy.Snapshot]
}

func newFixture(t testing.TB, mutate func(*ServerConfig, *Config)) *fixture {
	t.Helper()
	f := &fixture{up: newFakeUpstream(t), cluster: newFakeUpstream(t), audit: &auditSink{}, clock: newClock(), metrics: metrics.New()}
	f.cluster.mu.Lock()
	f.cluster.nxUnknown = true
	f.cluster.rrs["db.llm-prod.svc.cluster.local./A"] = []dns.RR{mustRR("db.llm-prod.svc.cluster.local. 5 IN A 10.96.0.10")}
	f.cluster.rrs["2.0.0.127.in-addr.arpa./PTR"] = []dns.RR{mustRR("2.0.0.127.in-addr.arpa. 5 IN PTR llm-0.llm-prod.pod.cluster.local.")}
	f.cluster.mu.Unlock()
	f.snapshot.Store(compilePolicy(t))
	rcfg := Config{Upstreams: []string{f.up.addr}, Metrics: f.metrics, Now: f.clock.Now}
	scfg := ServerConfig{
		Policy:     f.snapshot.Load,
		Identity:   testPods(),
		Audit:      audit.New(audit.Config{Writers: []io.Writer{f.audit}, Metrics: f.metrics}),
		Metrics:    f.metrics,
		ClusterDNS: []string{f.cluster.addr},
	}
	if mutate != nil {
		mutate(&scfg, &rcfg)
	}
	f.res = newTestResolver(t, rcfg)
	scfg.Resolver = f.res
	srv, err := NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	pc, ln := listenPair(t)
	f.addr = pc.LocalAddr().String()
	done := make(chan error, 2)
	go func() { done <- srv.ServeUDP(pc) }()
	go func() { done <- srv.ServeTCP(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		for i := 0; i < 2; i++ {
			if err := <-done; err != nil && !errors.Is(err, ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return f
}

// ask sends one query from the client address src over network ("udp" or
// "tcp") with EDNS0 (bufsize 1232; 0 means no EDNS0).
func (f *fixture) ask(t *testing.T, src, network, name string, qtype uint16, bufsize uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if bufsize > 0 {
		m.SetEdns0(bufsize, false)
	}
	return f.exchange(t, src, network, m)
}

func (f *fixture) exchange(t *testing.T, src, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(src)}
	if network == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}, UDPSize: 65535}
	resp, _, err := c.Exchange(m, f.addr)
	if err != nil {
		t.Fatalf("%s %s from %s: %v", network, m.Question[0].Name, src, err)
	}
	return resp
}

func ede(m *dns.Msg) *dns.EDNS0_EDE {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				return e
			}
		}
	}
	return nil
}

func answerAddrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if a, ok := addrOfRR(rr); ok {
			out = append(out, a.String())
		}
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
