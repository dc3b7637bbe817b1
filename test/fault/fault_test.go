// Package fault is the fault suite: the real egressd binary (built once by
// TestMain) against an outside world that misbehaves — an upstream DNS
// server that stops answering, answers garbage or truncates forever, an
// origin that accepts and never answers or resets mid-handshake, and a
// SIGTERM under load. Each test asserts what users rely on: a clear
// status (502/504), exactly one record per request with its outcome, no
// goroutine left behind, and recovery when the fault ends.
//
// Everything runs on 127.0.0.0/8; clients bind to 127.0.0.2 (a pod).
package fault

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/testutil"
)

var egressdBin string

func TestMain(m *testing.M) { os.Exit(testutil.MainWithEgressd(m, &egressdBin)) }

const pod = "127.0.0.2"

// dnsMode is how the upstream DNS server behaves.
type dnsMode int32

const (
	dnsOK       dnsMode = iota
	dnsSilent           // reads queries, answers nothing
	dnsGarbage          // answers bytes that are not a DNS message
	dnsTruncate         // answers TC=1 without records, over UDP and TCP
)

// world is the outside: DNS for *.fault.test on 127.0.0.1 (TTL 1) and
// origins that behave or not.
type world struct {
	dnsAddr  string
	mode     atomic.Int32
	queries  atomic.Int64
	caPool   *x509.CertPool
	tlsPort  string // a TLS origin that answers GET /small
	hangPort string // accepts and never answers
	rstPort  string // accepts, reads, resets
	httpPort string // plain HTTP origin
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{}
	ca, err := certs.NewCA("fault CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("ok.fault.test", "hang.fault.test", "rst.fault.test")
	if err != nil {
		t.Fatal(err)
	}
	w.caPool = x509.NewCertPool()
	w.caPool.AppendCertsFromPEM(ca.CertPEM())
	small := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(rw, "ok") })

	tln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	hln := listen(t)
	ts, hs := &http.Server{Handler: small}, &http.Server{Handler: small}
	go func() { _ = ts.Serve(tln) }()
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { ts.Close(); hs.Close() })
	w.tlsPort, w.httpPort = port(tln.Addr()), port(hln.Addr())

	// hang: accept, hold, never write.
	hang := listen(t)
	w.hangPort = port(hang.Addr())
	var held sync.Map
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			held.Store(c, true)
		}
	}()
	t.Cleanup(func() {
		held.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	// rst: accept, read what comes (a ClientHello or a request), reset.
	rst := listen(t)
	w.rstPort = port(rst.Addr())
	go func() {
		for {
			c, err := rst.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 512)
				_, _ = c.Read(buf)
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
	}()

	pc, tcpLn := dnstest.ListenPair(t)
	w.dnsAddr = pc.LocalAddr().String()
	go w.serveUDP(pc)
	tcpSrv := &dns.Server{Listener: tcpLn, Handler: dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		if m := w.answer(q); m != nil {
			_ = rw.WriteMsg(m)
		}
	})}
	go func() { _ = tcpSrv.ActivateAndServe() }()
	t.Cleanup(func() { pc.Close(); _ = tcpSrv.Shutdown() })
	return w
}

// serveUDP answers by mode; garbage is written raw.
func (w *world) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		w.queries.Add(1)
		q := new(dns.Msg)
		if q.Unpack(buf[:n]) != nil {
			continue
		}
		if dnsMode(w.mode.Load()) == dnsGarbage {
			_, _ = pc.WriteTo([]byte("\x00\x01garbage, not a DNS message"), from)
			continue
		}
		m := w.answer(q)
		if m == nil {
			continue
		}
		out, err := m.Pack()
		if err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// answer returns the reply for q in the current mode; nil means silence.
func (w *world) answer(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	switch dnsMode(w.mode.Load()) {
	case dnsSilent:
		return nil
	case dnsTruncate:
		m.Truncated = true
		return m
	case dnsGarbage:
		m.Rcode = dns.RcodeFormatError
		m.Id = q.Id + 1 // a mismatched id: garbage over TCP too
		return m
	}
	m.Authoritative = true
	if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA && strings.HasSuffix(q.Question[0].Name, ".fault.test.") {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
			A:   net.IPv4(127, 0, 0, 1),
		})
	}
	return m
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func port(a net.Addr) string { _, p, _ := net.SplitHostPort(a.String()); return p }

// instance is a running egressd process.
type instance struct {
	cmd       *exec.Cmd
	proxy     string
	dns       string
	metrics   string
	auditFile string
	exited    chan error
	log       *bytes.Buffer
	logMu     *sync.Mutex
}

const policyTmpl = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: fault, namespace: fault}
spec:
  podSelector: {matchLabels: {app: fault}}
  egress:
  - hosts: ["**.fault.test"]
    ports: [%s]
    cidrs: [127.0.0.0/8]
`

const pods = `apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: fault-0, namespace: fault, uid: u-0, labels: {app: fault}}
  spec: {serviceAccountName: default}
  status: {phase: Running, podIPs: [{ip: 127.0.0.2}]}
`

func startEgressd(t *testing.T, w *world, extra ...string) *instance {
	t.Helper()
	dir := t.TempDir()
	ports := strings.Join([]string{w.tlsPort, w.hangPort, w.rstPort, w.httpPort}, ", ")
	write(t, filepath.Join(dir, "policy.yaml"), fmt.Sprintf(policyTmpl, ports))
	write(t, filepath.Join(dir, "pods.yaml"), pods)
	in := &instance{auditFile: filepath.Join(dir, "audit.jsonl"), exited: make(chan error, 1), log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	args := append([]string{"run", "--policy", filepath.Join(dir, "policy.yaml"), "--pods", filepath.Join(dir, "pods.yaml"),
		"--proxy-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--upstream-dns", w.dnsAddr, "--audit-file", in.auditFile, "--log-level", "info", "--drain-timeout", "3s",
		// No lameduck unless a test asks for one (TestLameduck): the others
		// stop egressd in their cleanup and would wait 5s each.
		"--lameduck", "0"}, extra...)
	in.cmd = exec.Command(egressdBin, args...)
	in.cmd.Stdout = io.Discard
	stderr, err := in.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			in.logMu.Lock()
			in.log.Write(append(sc.Bytes(), '\n'))
			in.logMu.Unlock()
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "egressd serving" {
				in.proxy, _ = line["proxy"].(string)
				in.dns, _ = line["dns"].(string)
				in.metrics, _ = line["metrics"].(string)
				once.Do(func() { close(ready) })
			}
		}
	}()
	go func() { in.exited <- in.cmd.Wait() }()
	select {
	case <-ready:
	case err := <-in.exited:
		t.Fatalf("egressd exited before serving: %v\n%s", err, in.logText())
	case <-time.After(30 * time.Second):
		t.Fatal("egressd did not start")
	}
	t.Cleanup(func() {
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.exited:
		case <-time.After(20 * time.Second):
			_ = in.cmd.Process.Kill()
			t.Error("egressd did not exit on SIGTERM")
		}
		if t.Failed() {
			t.Log("egressd log:\n" + in.logText())
		}
	})
	return in
}

func (in *instance) logText() string {
	in.logMu.Lock()
	defer in.logMu.Unlock()
	return in.log.String()
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// record is what the tests read of an audit record.
type record struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Event   string `json:"event"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
	Client  struct {
		IP string `json:"ip"`
	} `json:"client"`
	DNS *struct {
		Stale bool   `json:"stale"`
		Rcode string `json:"rcode"`
	} `json:"dns"`
	TLS *struct {
		Result string `json:"result"`
	} `json:"tls"`
	HTTP *struct {
		Status int `json:"status"`
	} `json:"http"`
}

func (in *instance) records(t *testing.T) []record {
	t.Helper()
	b, err := os.ReadFile(in.auditFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []record
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line is not JSON: %q", line)
		}
		out = append(out, r)
	}
	return out
}

// waitRecords polls the audit file (records are written in batches of at
// most 50 ms) until n end records match f, and returns them.
func (in *instance) waitRecords(t *testing.T, n int, f func(record) bool) []record {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got []record
		for _, r := range in.records(t) {
			if r.Event != "interim" && f(r) {
				got = append(got, r)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%d matching records, want %d: %+v", len(got), n, got)
			}
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connect sends CONNECT host:port from the pod and returns the status and
// the open connection (nil unless 200).
func (in *instance) connect(t *testing.T, host, p string) (int, net.Conn) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
	c, err := d.Dial("tcp", in.proxy)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	target := net.JoinHostPort(host, p)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != 200 {
		c.Close()
		return resp.StatusCode, nil
	}
	return 200, c
}

// get does an absolute-form GET through the proxy and returns the status.
func (in *instance) get(t *testing.T, url string) int {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
	c, err := d.Dial("tcp", in.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	host := strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", url, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// gauge reads one gauge from /metrics.
func (in *instance) gauge(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + in.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}

// settles waits until go_goroutines is at most limit.
func (in *instance) settles(t *testing.T, limit float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := in.gauge(t, "go_goroutines")
		if g <= limit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("go_goroutines %v, want at most %v: something was left behind", g, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUpstreamDNSStops: the upstream stops answering. Within the stale
// window the cached answer is served (dns.stale in the record); after it
// the request fails with 502 and outcome resolve-failed (verdict allow:
// the policy allowed it); when the upstream returns, requests work again
// once the last failure's window (--dns-failure-ttl, RFC 9520) is over.
func TestUpstreamDNSStops(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--dns-stale-for", "3s", "--dns-timeout", "300ms", "--dns-failure-ttl", failureTTL.String())
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st != 200 {
		t.Fatalf("healthy upstream: status %d", st)
	} else {
		c.Close()
	}
	w.mode.Store(int32(dnsSilent))
	time.Sleep(1100 * time.Millisecond) // the TTL (1 s) runs out: the next lookup asks upstream
	st, c := in.connect(t, "ok.fault.test", w.tlsPort)
	if st != 200 {
		t.Fatalf("within the stale window: status %d, want 200 (serve-stale)", st)
	}
	c.Close()
	in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.DNS != nil && r.DNS.Stale })

	time.Sleep(3 * time.Second) // past the stale window
	if st, _ := in.connect(t, "ok.fault.test", w.tlsPort); st != http.StatusBadGateway {
		t.Fatalf("after the stale window: status %d, want 502", st)
	}
	recs := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Outcome == "resolve-failed" })
	if r := recs[0]; r.Verdict != "allow" || r.Reason != "allowed" {
		t.Fatalf("resolve failure changed the decision: %+v", r)
	}

	w.mode.Store(int32(dnsOK))
	recovered(t, w, in)
}

// failureTTL is the fault tests' --dns-failure-ttl: a failed lookup is
// answered from the failure this long (RFC 9520) before egressd asks the
// upstream again.
const failureTTL = 200 * time.Millisecond

// recovered checks that a request through a recovered upstream DNS works
// once the last failure's window (failureTTL) has passed, and not later.
func recovered(t *testing.T, w *world, in *instance) {
	t.Helper()
	time.Sleep(failureTTL)
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st != 200 {
		t.Fatalf("after recovery: status %d", st)
	} else {
		c.Close()
	}
}

// TestUpstreamDNSGarbage: garbage and endless truncation fail the lookup
// within bounded time, with a record, and egressd keeps serving.
func TestUpstreamDNSGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode dnsMode
	}{{"garbage", dnsGarbage}, {"truncation loop", dnsTruncate}} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t)
			in := startEgressd(t, w, "--dns-stale-for", "-1s", "--dns-timeout", "300ms", "--dns-failure-ttl", failureTTL.String())
			w.mode.Store(int32(tc.mode))
			start := time.Now()
			if st, _ := in.connect(t, "ok.fault.test", w.tlsPort); st != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", st)
			}
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("took %s", el)
			}
			in.waitRecords(t, 1, func(r record) bool { return r.Outcome == "resolve-failed" })
			// The stub resolver answers SERVFAIL for the same name, with a record.
			q := new(dns.Msg)
			q.SetQuestion("ok.fault.test.", dns.TypeA)
			cl := &dns.Client{Net: "udp", Timeout: 10 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(pod)}}}
			resp, _, err := cl.Exchange(q, in.dns)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Rcode != dns.RcodeServerFailure {
				t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
			}
			in.waitRecords(t, 1, func(r record) bool { return r.Kind == "dns" })
			w.mode.Store(int32(dnsOK))
			recovered(t, w, in)
		})
	}
}

// TestOriginFaults: an origin that accepts and never answers, and one
// that resets mid-handshake. Plain HTTP gets 504 and 502; tunnels end
// with their TLS result and outcome; nothing is left running.
func TestOriginFaults(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--response-timeout", "500ms")
	// Warm-up: a healthy tunnel and a healthy plain request first, so that
	// what egressd starts on first use and keeps (socket pools, timers)
	// is in the baseline.
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st == 200 {
		tc := tls.Client(c, &tls.Config{ServerName: "ok.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	} else {
		t.Fatalf("warm-up CONNECT: status %d", st)
	}
	if st := in.get(t, "http://ok.fault.test:"+w.httpPort+"/small"); st != 200 {
		t.Fatalf("warm-up GET: status %d", st)
	}
	in.waitRecords(t, 2, func(r record) bool { return r.Host == "ok.fault.test" })
	base := in.gauge(t, "go_goroutines")

	t.Run("http origin never answers: 504", func(t *testing.T) {
		if st := in.get(t, "http://hang.fault.test:"+w.hangPort+"/x"); st != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", st)
		}
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "http" && r.Host == "hang.fault.test" })[0]
		if r.Verdict != "allow" || r.Reason != "allowed" || r.Outcome != "upstream-error" || r.HTTP == nil || r.HTTP.Status != 504 {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("http origin resets: 502", func(t *testing.T) {
		if st := in.get(t, "http://rst.fault.test:"+w.rstPort+"/x"); st != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", st)
		}
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "http" && r.Host == "rst.fault.test" })[0]
		if r.Verdict != "allow" || r.Outcome != "upstream-error" || r.HTTP == nil || r.HTTP.Status != 502 {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("tunnel: origin resets mid-handshake", func(t *testing.T) {
		st, c := in.connect(t, "rst.fault.test", w.rstPort)
		if st != 200 {
			t.Fatalf("CONNECT status %d", st)
		}
		tc := tls.Client(c, &tls.Config{ServerName: "rst.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake with a resetting origin succeeded")
		}
		c.Close()
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Host == "rst.fault.test" })[0]
		if r.Verdict != "allow" || r.Outcome != "upstream-error" || r.TLS == nil || r.TLS.Result != "no-server-hello" {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("tunnel: origin never answers, client gives up", func(t *testing.T) {
		st, c := in.connect(t, "hang.fault.test", w.hangPort)
		if st != 200 {
			t.Fatalf("CONNECT status %d", st)
		}
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		tc := tls.Client(c, &tls.Config{ServerName: "hang.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake with a silent origin succeeded")
		}
		c.Close()
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Host == "hang.fault.test" })[0]
		if r.Verdict != "allow" || r.TLS == nil || r.TLS.Result != "no-server-hello" {
			t.Fatalf("record %+v", r)
		}
	})
	in.settles(t, base+3) // a leak per faulty request (four of them) would pass it
}

// TestSIGTERMUnderLoad: SIGTERM while clients keep opening tunnels and
// requests, with --lameduck 0 (startEgressd), so that the listener closes
// at once and the drain begins under load (TestLameduck covers the
// lameduck). egressd exits 0 within the drain timeout, and every request
// that got an answer (or a tunnel) has exactly one end record; no record
// stands for a request that was never sent.
func TestSIGTERMUnderLoad(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--drain-timeout", "2s")
	var answered, sent atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
				c, err := d.Dial("tcp", in.proxy)
				if err != nil {
					return // the listener is closed: the drain began
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var req string
				if i%2 == 0 {
					target := "ok.fault.test:" + w.tlsPort
					req = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
				} else {
					req = "GET http://ok.fault.test:" + w.httpPort + "/small HTTP/1.1\r\nHost: ok.fault.test\r\nConnection: close\r\n\r\n"
				}
				if _, err := io.WriteString(c, req); err != nil {
					c.Close()
					continue
				}
				sent.Add(1)
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					c.Close()
					continue
				}
				answered.Add(1)
				if i%2 == 0 && resp.StatusCode == 200 {
					// Hold the tunnel with a TLS request or two: the drain
					// sees open tunnels.
					tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "ok.fault.test", RootCAs: w.caPool})
					if tc.Handshake() == nil {
						_, _ = io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: ok.fault.test\r\n\r\n")
						if r2, err := http.ReadResponse(bufio.NewReader(tc), nil); err == nil {
							_, _ = io.Copy(io.Discard, r2.Body)
						}
					}
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				c.Close()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond) // load is running
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-in.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		in.exited <- nil // for Cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("egressd did not exit within 15s of SIGTERM")
	}
	cancel()
	wg.Wait()
	recs := in.records(t)
	ids := map[string]int{}
	ends := int64(0)
	for _, r := range recs {
		if r.Event == "interim" || r.Client.IP != pod {
			continue
		}
		ends++
		ids[r.ID]++
		if ids[r.ID] > 1 {
			t.Errorf("id %s has %d end records", r.ID, ids[r.ID])
		}
	}
	if ends < answered.Load() || ends > sent.Load() {
		t.Fatalf("%d end records; %d requests answered, %d sent: want answered ≤ records ≤ sent", ends, answered.Load(), sent.Load())
	}
	t.Logf("%d requests sent, %d answered, %d end records", sent.Load(), answered.Load(), ends)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
