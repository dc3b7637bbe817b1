package resolver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/metrics"
)

func TestCacheTTL(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		qname   string
		qtype   uint16
		life    time.Duration // how long the entry is served from the cache
		firstTT uint32        // TTL handed out right after the miss
	}{
		{"record ttl", Config{}, "models.test", dns.TypeA, 300 * time.Second, 300},
		{"smallest ttl of the chain", Config{}, "x.blob.test", dns.TypeA, 60 * time.Second, 60},
		{"max clamp", Config{MaxTTL: 100 * time.Second}, "models.test", dns.TypeA, 100 * time.Second, 100},
		{"min clamp", Config{MinTTL: 90 * time.Second}, "x.blob.test", dns.TypeA, 90 * time.Second, 90},
		{"negative nxdomain: SOA minimum", Config{}, "nx.blob.test", dns.TypeA, 60 * time.Second, 60},
		{"negative nodata: SOA minimum", Config{}, "nodata.blob.test", dns.TypeA, 120 * time.Second, 120},
		{"negative clamp", Config{MaxNegativeTTL: 10 * time.Second}, "nx.blob.test", dns.TypeA, 10 * time.Second, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := dnstest.NewUpstream(t)
			clk := dnstest.NewClock()
			cfg := tc.cfg
			cfg.Upstreams, cfg.Now = []string{up.Addr}, clk.Now
			r := newTestResolver(t, cfg)
			ctx := context.Background()
			res, err := r.Query(ctx, tc.qname, tc.qtype)
			if err != nil {
				t.Fatal(err)
			}
			if res.Cached || res.Msg.Rcode == dns.RcodeServerFailure {
				t.Fatalf("first query: cached %v rcode %d", res.Cached, res.Msg.Rcode)
			}
			if got := ttlOf(res.Msg); got != tc.firstTT {
				t.Errorf("first TTL %d, want %d", got, tc.firstTT)
			}
			clk.Advance(tc.life - time.Second)
			res, err = r.Query(ctx, tc.qname, tc.qtype)
			if err != nil || !res.Cached || ttlOf(res.Msg) != 1 {
				t.Fatalf("1s before expiry: cached %v ttl %d err %v, want cached ttl 1", res.Cached, ttlOf(res.Msg), err)
			}
			if up.Total.Load() != 1 {
				t.Fatalf("upstream asked %d times, want 1", up.Total.Load())
			}
			clk.Advance(time.Second)
			res, err = r.Query(ctx, tc.qname, tc.qtype)
			if err != nil || res.Cached || up.Total.Load() != 2 {
				t.Fatalf("at expiry: cached %v err %v upstream %d, want a new query", res.Cached, err, up.Total.Load())
			}
		})
	}
}

func ttlOf(m *dns.Msg) uint32 {
	rrs := m.Answer
	if len(rrs) == 0 {
		rrs = m.Ns
	}
	if len(rrs) == 0 {
		return 0
	}
	return MinTTL(rrs)
}

func TestCacheKeyAndBound(t *testing.T) {
	up := dnstest.NewUpstream(t)
	m := metrics.New()
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, CacheSize: 2, Metrics: m, Now: dnstest.NewClock().Now})
	ctx := context.Background()
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"models.test", dns.TypeA}, {"MODELS.TEST.", dns.TypeA}, {"models.test", dns.TypeAAAA}, {"x.blob.test", dns.TypeA}} {
		if _, err := r.Query(ctx, q.name, q.qtype); err != nil {
			t.Fatal(err)
		}
	}
	if got := up.Total.Load(); got != 3 {
		t.Errorf("upstream asked %d times, want 3 (case-insensitive key, type in key)", got)
	}
	if r.cache.len() != 2 || value(m.CacheSize) != 2 {
		t.Errorf("cache holds %d (gauge %v), want the bound 2", r.cache.len(), value(m.CacheSize))
	}
	if value(m.CacheHits) != 1 || value(m.CacheMisses) != 3 {
		t.Errorf("hits %v misses %v, want 1 and 3", value(m.CacheHits), value(m.CacheMisses))
	}
}

func TestNoSOANotCached(t *testing.T) {
	r := newTestResolver(t, Config{Upstreams: []string{"127.0.0.1:1"}})
	msg := &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}}
	if got := r.lifetime(msg); got != 0 {
		t.Errorf("NXDOMAIN without SOA cached for %s (RFC 2308 §5: should not)", got)
	}
	msg.Rcode = dns.RcodeServerFailure
	msg.Ns = []dns.RR{dnstest.SOA("test.", 60, 60)}
	if got := r.lifetime(msg); got != 0 {
		t.Errorf("SERVFAIL cached for %s", got)
	}
}

func TestCoalescing(t *testing.T) {
	const n = 20
	up := dnstest.NewUpstream(t)
	release, arrived := up.Gate(2 * n)
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}})
	called := make(chan struct{}, n)
	r.flights.onCall = func(cacheKey) { called <- struct{}{} }

	var wg sync.WaitGroup
	results := make([]*Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = r.Query(context.Background(), "models.test", dns.TypeA) })
	}
	<-arrived // the one query reached the upstream
	for range n {
		<-called // and everybody is in its flight (which cannot end before release)
	}
	release()
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !slices.Equal(answerAddrs(results[i].Msg), []string{"203.0.113.10"}) {
			t.Fatalf("caller %d: %v %v", i, results[i], errs[i])
		}
	}
	if got := up.Total.Load(); got != 1 {
		t.Errorf("%d concurrent misses made %d upstream queries, want 1", n, got)
	}
}

func TestCoalescedCallerCancel(t *testing.T) {
	up := dnstest.NewUpstream(t)
	release, arrived := up.Gate(4)
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Query(ctx, "models.test", dns.TypeA)
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	release()
	// The detached query still completes and fills the cache.
	res, err := r.Query(context.Background(), "models.test", dns.TypeA)
	if err != nil || len(res.Msg.Answer) != 1 {
		t.Fatalf("after cancel: %v %v", res, err)
	}
}

func TestServeStale(t *testing.T) {
	up := dnstest.NewUpstream(t)
	clk := dnstest.NewClock()
	m := metrics.New()
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: clk.Now, StaleFor: time.Hour, Metrics: m})
	ctx := context.Background()
	if _, err := r.Query(ctx, "models.test", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	clk.Advance(301 * time.Second)
	up.Failing.Store(true)
	tests := []struct {
		name    string
		advance time.Duration
		stale   bool
	}{
		{"expired, upstream failing: stale", 0, true},
		{"inside the stale horizon", 58 * time.Minute, true},
		{"past the stale horizon", 2 * time.Minute, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk.Advance(tc.advance)
			res, err := r.Query(ctx, "models.test", dns.TypeA)
			if !tc.stale {
				if !errors.Is(err, ErrUpstream) {
					t.Fatalf("got %v %v, want ErrUpstream", res, err)
				}
				return
			}
			if err != nil || !res.Stale || res.Cached || ttlOf(res.Msg) != staleTTL {
				t.Fatalf("got %+v %v, want stale with TTL %d", res, err, staleTTL)
			}
		})
	}
	if value(m.UpstreamErrors.WithLabelValues("servfail")) == 0 {
		t.Error("upstream SERVFAIL not counted")
	}
	t.Run("upstream back: fresh again", func(t *testing.T) {
		up.Failing.Store(false)
		clk.Advance(DefaultFailureTTL) // past the last failure's window (RFC 9520)
		res, err := r.Query(ctx, "models.test", dns.TypeA)
		if err != nil || res.Stale || ttlOf(res.Msg) != 300 {
			t.Fatalf("got %+v %v", res, err)
		}
	})
}

// TestFailureCached: a failed resolution is answered from the failure for
// FailureTTL without a packet upstream (RFC 9520), the stale entry first
// when there is one; after the window the upstream is asked again, and an
// answer ends the window at once.
func TestFailureCached(t *testing.T) {
	up := dnstest.NewUpstream(t)
	clk := dnstest.NewClock()
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: clk.Now})
	ctx := context.Background()
	asked := func() int { return up.Count("models.test.", "A", "udp") }
	if _, err := r.Query(ctx, "models.test", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	up.Failing.Store(true)
	if _, err := r.Query(ctx, "evil.test", dns.TypeA); !errors.Is(err, ErrUpstream) {
		t.Fatalf("failing upstream: got %v, want ErrUpstream", err)
	}
	n := up.Count("evil.test.", "A", "udp")
	for i := range 3 {
		_, err := r.Query(ctx, "evil.test", dns.TypeA)
		if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "RFC 9520") {
			t.Fatalf("query %d inside the window: got %v, want the cached failure", i, err)
		}
		if n := strings.Count(err.Error(), "resolver:"); n != 1 {
			t.Fatalf("query %d: %q says resolver: %d times, want once (docs/architecture.md \"Errors\")", i, err, n)
		}
	}
	if got := up.Count("evil.test.", "A", "udp"); got != n {
		t.Fatalf("upstream asked %d times inside the failure window, want 0", got-n)
	}
	// The window's error is made when the failure is remembered: a query
	// inside it allocates only its name (a question that upstream always
	// refuses is asked by every new connection).
	if a := testing.AllocsPerRun(100, func() { _, _ = r.Query(ctx, "evil.test", dns.TypeA) }); a > 1 {
		t.Fatalf("a query inside the failure window: %.0f allocations, want at most 1 (the name)", a)
	}

	// An expired entry that fails again: stale inside the window too.
	clk.Advance(301 * time.Second)
	before := asked()
	for range 3 {
		res, err := r.Query(ctx, "models.test", dns.TypeA)
		if err != nil || !res.Stale {
			t.Fatalf("got %+v %v, want the stale answer", res, err)
		}
	}
	if got := asked() - before; got == 0 || got > 2 {
		t.Fatalf("upstream asked %d times for an expired name in one window, want the first miss's tries only", got)
	}

	// Past the window the upstream is asked again; its answer ends the
	// failure.
	up.Failing.Store(false)
	clk.Advance(DefaultFailureTTL)
	if _, err := r.Query(ctx, "evil.test", dns.TypeA); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if got := up.Count("evil.test.", "A", "udp"); got != n+1 {
		t.Fatalf("upstream asked %d times after the window, want 1", got-n)
	}

	t.Run("disabled", func(t *testing.T) {
		r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: clk.Now, FailureTTL: -1})
		up.Failing.Store(true)
		defer up.Failing.Store(false)
		before := up.Count("nx.blob.test.", "A", "udp")
		for range 2 {
			if _, err := r.Query(ctx, "nx.blob.test", dns.TypeA); !errors.Is(err, ErrUpstream) {
				t.Fatalf("got %v", err)
			}
		}
		if got := up.Count("nx.blob.test.", "A", "udp") - before; got < 2 {
			t.Fatalf("FailureTTL -1: upstream asked %d times for two queries, want each asked", got)
		}
	})
}

// TestLookupIPRefusedFamily: an upstream that refuses AAAA for a name
// (dnsmasq serving a hosts file does) costs one AAAA exchange per failure
// window, not one per lookup, and the name's A addresses are answered
// every time: before the failure cache, every new connection through the
// proxy asked the refused question again.
func TestLookupIPRefusedFamily(t *testing.T) {
	up := dnstest.NewUpstream(t)
	up.Refuse("models.test./AAAA")
	clk := dnstest.NewClock()
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: clk.Now})
	ctx := context.Background()
	for i := range 5 {
		ans, err := r.LookupIP(ctx, "models.test")
		if err != nil || len(ans.Addrs) != 1 || ans.Addrs[0].String() != "203.0.113.10" {
			t.Fatalf("lookup %d: %+v %v", i, ans, err)
		}
	}
	if n := up.Count("models.test.", "AAAA", "udp"); n != 1 {
		t.Fatalf("AAAA asked %d times in one failure window, want 1", n)
	}
	if n := up.Count("models.test.", "A", "udp"); n != 1 {
		t.Fatalf("A asked %d times, want 1 (cached)", n)
	}
	// Inside the window a lookup costs no new error (failureErr) and no
	// failed IP parse of the name (ipLiteral): 14 allocations before.
	if a := testing.AllocsPerRun(100, func() { _, _ = r.LookupIP(ctx, "models.test") }); a > 7 {
		t.Fatalf("a lookup inside the AAAA failure window: %.0f allocations, want at most 7", a)
	}
	clk.Advance(DefaultFailureTTL)
	if _, err := r.LookupIP(ctx, "models.test"); err != nil {
		t.Fatal(err)
	}
	if n := up.Count("models.test.", "AAAA", "udp"); n != 2 {
		t.Fatalf("AAAA asked %d times after the window, want 2", n)
	}
}

func TestFailover(t *testing.T) {
	up := dnstest.NewUpstream(t)
	dead := dnstest.ClosedAddr(t)
	m := metrics.New()
	r := newTestResolver(t, Config{Upstreams: []string{dead, up.Addr}, Metrics: m})
	ctx := context.Background()
	res, err := r.Query(ctx, "models.test", dns.TypeA)
	if err != nil || res.Upstream != up.Addr {
		t.Fatalf("got %+v %v, want an answer from %s", res, err, up.Addr)
	}
	failures := value(m.UpstreamErrors.WithLabelValues("network"))
	if failures != 1 {
		t.Errorf("network errors %v, want 1", failures)
	}
	// The upstream that answered is asked first from now on.
	if _, err := r.Query(ctx, "x.blob.test", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	if got := value(m.UpstreamErrors.WithLabelValues("network")); got != failures {
		t.Errorf("dead upstream asked again: errors %v", got)
	}
	t.Run("all dead", func(t *testing.T) {
		r := newTestResolver(t, Config{Upstreams: []string{dead, dnstest.ClosedAddr(t)}})
		if _, err := r.Query(ctx, "models.test", dns.TypeA); !errors.Is(err, ErrUpstream) {
			t.Fatalf("got %v, want ErrUpstream", err)
		}
	})
}

func TestLookupIP(t *testing.T) {
	up := dnstest.NewUpstream(t)
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: dnstest.NewClock().Now})
	tests := []struct {
		name   string
		host   string
		addrs  []string
		cnames []string
		ttl    uint32
		rcode  int
		err    error
	}{
		{"both families", "models.test", []string{"203.0.113.10", "2001:db8::10"}, nil, 300, dns.RcodeSuccess, nil},
		{"trailing dot and case", "Models.Test.", []string{"203.0.113.10", "2001:db8::10"}, nil, 300, dns.RcodeSuccess, nil},
		{"cname chain", "x.blob.test", []string{"203.0.113.20"}, []string{"edge.example.net"}, 60, dns.RcodeSuccess, nil},
		{"chain ends early: target asked", "half.blob.test", []string{"203.0.113.20"}, []string{"edge.example.net"}, 60, dns.RcodeSuccess, nil},
		{"nxdomain", "nx.blob.test", nil, nil, 60, dns.RcodeNameError, ErrNXDomain},
		{"nodata", "nodata.blob.test", nil, nil, 120, dns.RcodeSuccess, ErrNoAddress},
		{"cname loop", "loop1.blob.test", nil, []string{"loop2.blob.test"}, 0, dns.RcodeServerFailure, ErrCNAMEChain},
		{"ip literal", "203.0.113.5", []string{"203.0.113.5"}, nil, 0, dns.RcodeSuccess, nil},
		{"bracketed ipv6 literal", "[2001:db8::1]", []string{"2001:db8::1"}, nil, 0, dns.RcodeSuccess, nil},
		{"empty", "", nil, nil, 0, dns.RcodeFormatError, ErrInvalidName},
		{"bad name", "a..b", nil, nil, 0, dns.RcodeFormatError, ErrInvalidName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := r.LookupIP(context.Background(), tc.host)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			var got []string
			for _, a := range ans.Addrs {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.addrs) || !slices.Equal(ans.CNAMEs, tc.cnames) || ans.Rcode != tc.rcode {
				t.Errorf("addrs %v cnames %v rcode %d, want %v %v %d", got, ans.CNAMEs, ans.Rcode, tc.addrs, tc.cnames, tc.rcode)
			}
			if tc.err == nil && tc.ttl > 0 && ans.TTL != tc.ttl {
				t.Errorf("ttl %d, want %d", ans.TTL, tc.ttl)
			}
		})
	}
	t.Run("second lookup is cached", func(t *testing.T) {
		ans, err := r.LookupIP(context.Background(), "x.blob.test")
		if err != nil || !ans.Cached || ans.Upstream != up.Addr {
			t.Fatalf("got %+v %v", ans, err)
		}
	})
}

func TestUpstreamsFromResolvConf(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
		wantErr bool
	}{
		{"two servers", "search ec2.internal\nnameserver 10.0.0.2\nnameserver 10.0.0.3\n", []string{"10.0.0.2:53", "10.0.0.3:53"}, false},
		{"ipv6", "nameserver fd00::53\n", []string{"[fd00::53]:53"}, false},
		{"none", "search x\n", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "resolv.conf")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := UpstreamsFromResolvConf(p)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v %v, want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	// The search list comes from the same read (readResolvConf).
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte(tests[0].content), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := SearchFromResolvConf(p); err != nil || !slices.Equal(got, []string{"ec2.internal"}) {
		t.Fatalf("SearchFromResolvConf = %v %v", got, err)
	}
	if _, err := SearchFromResolvConf(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("SearchFromResolvConf of a missing file: no error")
	}
}

func TestConfigValidate(t *testing.T) {
	m := metrics.New()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"ok", Config{Upstreams: []string{"10.0.0.2", "10.0.0.3:5353", "[::1]:53"}, Metrics: m}, true},
		{"no upstream", Config{Metrics: m}, false},
		{"name as upstream", Config{Upstreams: []string{"dns.example.com:53"}, Metrics: m}, false},
		{"port 0", Config{Upstreams: []string{"10.0.0.2:0"}, Metrics: m}, false},
		{"no metrics", Config{Upstreams: []string{"10.0.0.2"}}, false},
		{"min above max", Config{Upstreams: []string{"10.0.0.2"}, Metrics: m, MinTTL: time.Hour, MaxTTL: time.Minute}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// value reads a counter or gauge (testutil would pull a module outside the
// graph).
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestBeforeWait: the func of WithBeforeWait runs before the caller waits
// on the upstream (it releases the upstream's gate here: called any later,
// the query would never be answered), after the question left, once per
// wait; not at all on a cache hit.
func TestBeforeWait(t *testing.T) {
	up := dnstest.NewUpstream(t)
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}})
	for _, tc := range []struct {
		name   string
		lookup func(ctx context.Context) error
		calls  int
	}{
		{"miss", func(ctx context.Context) error {
			_, err := r.Query(ctx, "models.test", dns.TypeA)
			return err
		}, 1},
		{"hit", func(ctx context.Context) error {
			_, err := r.Query(ctx, "models.test", dns.TypeA)
			return err
		}, 0},
		{"LookupIP, AAAA still missing", func(ctx context.Context) error {
			_, err := r.LookupIP(ctx, "models.test")
			return err
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release, arrived := up.Gate(4)
			calls := 0
			ctx := WithBeforeWait(context.Background(), func() {
				calls++
				if tc.calls > 0 {
					<-arrived // the question left before the wait
				}
				release()
			})
			done := make(chan error, 1)
			go func() { done <- tc.lookup(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				release()
				t.Fatal("the caller waited before calling its before-wait func")
			}
			release()
			if calls != tc.calls {
				t.Errorf("called %d times, want %d", calls, tc.calls)
			}
		})
	}
}

// TestFailuresBounded: the failure window holds at most its bound; a new
// failure that finds it full starts it afresh and is remembered.
func TestFailuresBounded(t *testing.T) {
	f := failures{max: 3}
	until := time.Now().Add(time.Hour)
	key := func(i int) cacheKey {
		return cacheKey{name: fmt.Sprintf("n%d.test.", i), qtype: dns.TypeA, qclass: dns.ClassINET}
	}
	for i := range 10 {
		f.put(key(i), until, ErrUpstream)
		if len(f.m) > 3 {
			t.Fatalf("%d failures remembered, bound 3", len(f.m))
		}
		if _, ok := f.get(key(i), time.Now()); !ok {
			t.Fatalf("failure %d not remembered", i)
		}
	}
}

func TestIPLiteral(t *testing.T) {
	for _, c := range []struct {
		name, host string
		want       string // "" for not an address
		// skip: no colon and no final digit, so not parsed (no error to
		// allocate)
		skip bool
	}{
		{"ipv4", "203.0.113.1", "203.0.113.1", false},
		{"ipv6", "2001:db8::1", "2001:db8::1", false},
		{"bracketed ipv6", "[2001:db8::1]", "2001:db8::1", false},
		{"zoned ipv6", "fe80::1%eth0", "fe80::1%eth0", false},
		{"mapped ipv4", "::ffff:192.0.2.1", "::ffff:192.0.2.1", false},
		{"name", "models.test", "", true},
		{"name with a digit label", "1e100.net", "", true},
		{"ipv4 with a trailing dot", "203.0.113.1.", "", true},
		{"leading zero", "01.2.3.4", "", false},
		{"empty", "", "", true},
		{"empty brackets", "[]", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, ok := ipLiteral(c.host)
			if got := map[bool]string{true: a.String(), false: ""}[ok]; got != c.want {
				t.Fatalf("ipLiteral(%q) = %q, want %q", c.host, got, c.want)
			}
			if allocs := testing.AllocsPerRun(10, func() { ipLiteral(c.host) }); c.skip && allocs != 0 {
				t.Fatalf("ipLiteral(%q): %.0f allocations, want 0", c.host, allocs)
			}
		})
	}
}
