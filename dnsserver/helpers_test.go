package dnsserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

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

// testPods: 127.0.0.2 and 127.0.0.4 are llm pods the policy selects,
// 127.0.0.3 a pod of another namespace no policy selects; 127.0.0.9 is
// nobody.
func testPods() *identity.Store {
	s := identity.NewStore()
	s.Replace([]*corev1.Pod{
		testutil.RunningPod("llm-prod", "llm-0", "sa", "127.0.0.2", map[string]string{"app": "llm"}),
		testutil.RunningPod("other", "web-0", "sa", "127.0.0.3", map[string]string{"app": "web"}),
		testutil.RunningPod("llm-prod", "llm-1", "sa", "127.0.0.4", map[string]string{"app": "llm"}),
	})
	return s
}

// auditSink collects audit lines. A test waits for the record of a query
// (waitFor): a UDP query that waited on the upstream is recorded after
// its answer is sent.
type auditSink struct {
	mu    sync.Mutex
	b     bytes.Buffer
	lines int
	grew  chan struct{} // closed and replaced by every write
}

func (a *auditSink) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lines += bytes.Count(p, []byte("\n"))
	if a.grew != nil {
		close(a.grew)
		a.grew = nil
	}
	return a.b.Write(p)
}

func (a *auditSink) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b.String()
}

// Reset empties the sink (benchmarks keep it from growing).
func (a *auditSink) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.b.Reset()
	a.lines = 0
}

// count returns the records written so far.
func (a *auditSink) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lines
}

// waitFor waits until n records were written (at most 5s, then fails).
func (a *auditSink) waitFor(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		if a.lines >= n {
			a.mu.Unlock()
			return
		}
		if a.grew == nil {
			a.grew = make(chan struct{})
		}
		grew := a.grew
		a.mu.Unlock()
		select {
		case <-grew:
		case <-deadline.C:
			t.Fatalf("%d audit records after 5s, want %d", a.count(), n)
		}
	}
}

func (a *auditSink) records(t *testing.T) []record.Record {
	t.Helper()
	var out []record.Record
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(a.String())), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r record.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// last returns the last record for host, waiting for it a while: a UDP
// query's record is written after its answer left (udp.go).
func (a *auditSink) last(t *testing.T, host string) record.Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs := a.records(t)
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].Host == host {
				return rs[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record for %q in %d records", host, len(rs))
		}
		time.Sleep(time.Millisecond)
	}
}

// fixture is a DNS server on 127.0.0.1 with a fake upstream, fake cluster
// DNS, the test policy and the test pods.
type fixture struct {
	srv      *Server
	res      *resolver.Resolver
	up       *dnstest.Upstream
	cluster  *dnstest.Upstream
	addr     string
	audit    *auditSink
	clock    *dnstest.Clock
	metrics  *metrics.Metrics
	snapshot atomic.Pointer[policy.Snapshot]
	stop     func() // shuts the server down (also at cleanup)
}

func newFixture(t testing.TB, mutate func(*Config, *resolver.Config)) *fixture {
	t.Helper()
	f := &fixture{up: dnstest.NewUpstream(t), cluster: dnstest.NewUpstream(t), audit: &auditSink{}, clock: dnstest.NewClock(), metrics: metrics.New()}
	f.cluster.NXUnknown()
	f.cluster.Set("db.llm-prod.svc.cluster.local./A", "db.llm-prod.svc.cluster.local. 5 IN A 10.96.0.10")
	f.cluster.Set("2.0.0.127.in-addr.arpa./PTR", "2.0.0.127.in-addr.arpa. 5 IN PTR llm-0.llm-prod.pod.cluster.local.")
	f.snapshot.Store(compilePolicy(t))
	rcfg := resolver.Config{Upstreams: []string{f.up.Addr}, Metrics: f.metrics, Now: f.clock.Now}
	scfg := Config{
		Inputs:     admit.Inputs{Policy: f.snapshot.Load, Identity: testPods()},
		Audit:      audit.New(audit.Config{Writers: []io.Writer{f.audit}, Metrics: f.metrics}),
		Metrics:    f.metrics,
		ClusterDNS: []string{f.cluster.Addr},
	}
	if mutate != nil {
		mutate(&scfg, &rcfg)
	}
	res, err := resolver.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	f.res = res
	scfg.Resolver = f.res
	srv, err := New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	pc, ln := dnstest.ListenPair(t)
	f.addr = pc.LocalAddr().String()
	done := make(chan error, 2)
	go func() { done <- srv.ServeUDP(pc) }()
	go func() { done <- srv.ServeTCP(ln) }()
	stopped := false
	f.stop = func() {
		if stopped {
			return
		}
		stopped = true
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
	}
	t.Cleanup(f.stop)
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

// exchange sends m from src and returns the answer, once its record is
// written.
func (f *fixture) exchange(t *testing.T, src, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	before := f.audit.count()
	resp := f.exchangeOnly(t, src, network, m)
	f.audit.waitFor(t, before+1)
	return resp
}

// exchangeOnly is exchange for a query that writes no record of its own
// (over the rate limit: it is counted in a summary).
func (f *fixture) exchangeOnly(t *testing.T, src, network string, m *dns.Msg) *dns.Msg {
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

var mustRR = dnstest.MustRR
