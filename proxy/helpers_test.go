package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// Test pods: llm-0 on 127.0.0.2 (selected by the policy), web-0 on
// 127.0.0.3 in another namespace (selected by nothing). 127.0.0.9 is no pod.
const (
	podIP   = "127.0.0.2"
	otherIP = "127.0.0.3"
	nobody  = "127.0.0.9"
)

// staticLookup resolves test names without DNS.
type staticLookup map[string][]netip.Addr

func (s staticLookup) LookupIP(_ context.Context, host string) (resolver.Answer, error) {
	addrs, ok := s[host]
	if !ok {
		return resolver.Answer{Rcode: 3}, fmt.Errorf("lookup %q: NXDOMAIN", host)
	}
	return resolver.Answer{Addrs: addrs, TTL: 30, Duration: 100 * time.Microsecond}, nil
}

// auditSink collects records; next waits for one.
type auditSink struct {
	mu    sync.Mutex
	all   bytes.Buffer
	lines chan []byte
}

func newAuditSink() *auditSink { return &auditSink{lines: make(chan []byte, 256)} }

func (s *auditSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.all.Write(p)
	s.mu.Unlock()
	s.lines <- append([]byte(nil), p...)
	return len(p), nil
}

func (s *auditSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.all.Bytes()...)
}

// next returns the next record; the timeout only turns a hang into a
// failure, it synchronizes nothing.
func (s *auditSink) next(t *testing.T) record.Record {
	t.Helper()
	select {
	case l := <-s.lines:
		var r record.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("record %s: %v", l, err)
		}
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("no audit record")
		return record.Record{}
	}
}

type env struct {
	t         testing.TB
	p         *Proxy
	addr      string // proxy listener
	sink      *auditSink
	ca        *certs.CA
	caFile    string
	tlsPort   int // TLS origin on 127.0.0.1
	httpPort  int // plain HTTP origin on 127.0.0.1
	dials     atomic.Int32
	dialAddrs sync.Map
	m         *metrics.Metrics
	seen      chan http.Header // headers the plain origin saw
	// snap is the policy in force and store the identities: tests swap
	// them to play a reload (setPolicy, revoke_test.go).
	snap  atomic.Pointer[policy.Snapshot]
	store *identity.Store
}

type envOpt struct {
	mode  policy.Mode
	extra string // extra YAML rules
	idle  time.Duration
	// lookup replaces the static test names (the real resolver test).
	lookup Lookuper
	// self lists the proxy listener in the guard's Self, as the CLI does.
	self bool
	// maxConns, headerTimeout and peekTimeout set the Config fields.
	maxConns      int
	headerTimeout time.Duration
	peekTimeout   time.Duration
	// discardAudit encodes records to io.Discard instead of the sink
	// (benchmarks: the sink keeps every line).
	discardAudit bool
	// log receives the proxy's own log (not audit records); nil discards.
	log io.Writer
	// identity replaces the store of the two test pods.
	identity identity.Source
	// httpPath, auditAvailable, interim and responseHeaderTimeout set the
	// Config fields.
	httpPath              HTTPPath
	auditAvailable        func() bool
	interim               Interim
	responseHeaderTimeout time.Duration
	// inspect makes Config.Inspect, given the origins' CA and the proxy's
	// Config (for its limits: Config.Inspection; inspect_test.go).
	inspect func(origins *certs.CA, cfg Config) *inspect.Engine
	// maxHeaderBytes sets Config.MaxHeaderBytes.
	maxHeaderBytes int
	// auditInterim makes the audit logger write interim records at this
	// interval and serve as Config.Interim (unless interim is set).
	auditInterim time.Duration
}

func newEnv(t testing.TB, o envOpt) *env {
	t.Helper()
	e := &env{t: t, sink: newAuditSink(), seen: make(chan http.Header, 16)}
	ca, err := certs.NewCA("egressd proxy test")
	if err != nil {
		t.Fatal(err)
	}
	e.ca = ca
	e.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(e.caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	e.tlsPort = e.startTLSOrigin()
	e.httpPort = e.startHTTPOrigin()

	ln := listen(t, "127.0.0.1:0")
	e.addr = ln.Addr().String()
	e.snap.Store(compile(t, e.policyYAML(o.extra)))
	store := identity.NewStore()
	e.store = store
	store.Replace([]*corev1.Pod{
		testutil.RunningPod("llm-prod", "llm-0", "llm-server", podIP, map[string]string{"app": "llm"}),
		testutil.RunningPod("web", "web-0", "default", otherIP, map[string]string{"app": "web"}),
	})
	lo := netip.MustParseAddr("127.0.0.1")
	e.m = metrics.New()
	var look Lookuper = staticLookup{
		"models.test":    {lo},
		"cdn.blob.test":  {lo},
		"evil.test":      {lo},
		"meta.test":      {netip.MustParseAddr("169.254.169.254")},
		"twoaddr.test":   {netip.MustParseAddr("127.0.0.1"), lo},
		"multi.test":     {netip.MustParseAddr("169.254.169.254"), lo},
		"norule.test":    {lo},
		"fallback.test":  {netip.MustParseAddr("127.0.0.4"), lo},
		"inspect.test":   {lo},
		"wrongname.test": {lo},
	}
	if o.lookup != nil {
		look = o.lookup
	}
	var src identity.Source = store
	if o.identity != nil {
		src = o.identity
	}
	var gcfg policy.GuardConfig
	if o.self {
		gcfg.Self = []netip.AddrPort{netip.MustParseAddrPort(ln.Addr().String())}
	}
	var auditW io.Writer = e.sink
	if o.discardAudit {
		auditW = io.Discard
	}
	logW := io.Discard
	if o.log != nil {
		logW = o.log
	}
	al := audit.New(audit.Config{Writers: []io.Writer{auditW}, Metrics: e.m, Interim: o.auditInterim})
	interim := o.interim
	if interim == nil && o.auditInterim > 0 {
		interim = al
	}
	cfg := Config{
		Inputs:   admit.Inputs{Policy: e.snap.Load, Identity: src, Mode: o.mode, AuditAvailable: o.auditAvailable},
		Resolver: look,

		MaxConnsPerClient: o.maxConns,
		HeaderTimeout:     o.headerTimeout,
		PeekTimeout:       o.peekTimeout,
		Guard:             policy.NewGuard(gcfg),
		Audit:             al,
		MaxHeaderBytes:    o.maxHeaderBytes,
		Metrics:           e.m,
		Logger:            slog.New(slog.NewTextHandler(logW, nil)),
		IdleTimeout:       o.idle,

		AuditHTTPPath:         o.httpPath,
		Interim:               interim,
		ResponseHeaderTimeout: o.responseHeaderTimeout,
	}
	cfg.Inspect = inspectEngine(o, ca, cfg)
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inner := p.dial
	p.dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		e.dials.Add(1)
		e.dialAddrs.Store(ap.String(), true)
		if !ap.Addr().IsLoopback() {
			// Belt and braces: a test never sends a packet off the host.
			return nil, fmt.Errorf("test refuses to dial non-loopback %s", ap)
		}
		return inner(ctx, ap)
	}
	e.p = p
	go p.ServeProxy(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return e
}

// policyYAML is the test policy; extra rules may say {tls} and {http} for
// the two origin ports and {proxy} for the proxy listener's.
func (e *env) policyYAML(extra string) string {
	_, proxyPort, _ := net.SplitHostPort(e.addr)
	extra = strings.NewReplacer("{tls}", strconv.Itoa(e.tlsPort), "{http}", strconv.Itoa(e.httpPort), "{proxy}", proxyPort).Replace(extra)
	return fmt.Sprintf(`apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm-bootstrap, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm}}
  egress:
  - hosts: ["models.test"]
    ports: [%[1]d, %[2]d]
    cidrs: ["127.0.0.0/8"]
    purpose: model weights
    owner: ml-platform
  - hosts: ["cdn.blob.test", "twoaddr.test", "multi.test", "fallback.test"]
    ports: [%[1]d, %[2]d]
    cidrs: ["127.0.0.0/8"]
  - hosts: ["meta.test"]
    ports: [%[1]d]
    cidrs: ["0.0.0.0/0"]
  - hosts: ["norule.test"]
    ports: [%[1]d]
%[3]s`, e.tlsPort, e.httpPort, extra)
}

func inspectEngine(o envOpt, origins *certs.CA, cfg Config) *inspect.Engine {
	if o.inspect == nil {
		return nil
	}
	return o.inspect(origins, cfg)
}

func compile(t testing.TB, y string) *policy.Snapshot {
	t.Helper()
	docs, err := policy.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	// As egressd run compiles with an inspection CA (inspect_test.go).
	snap, err := policy.CompileWith(docs, policy.ValidateOptions{InspectAvailable: true})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// startTLSOrigin serves /w.bin (a body), /redirect?to=URL (302), /hold
// (no answer), /drip (a slow stream), /stall (one byte, then nothing) and
// /echo on 127.0.0.1 with a certificate for every test name.
func (e *env) startTLSOrigin() int {
	cert, err := e.ca.Issue("models.test", "cdn.blob.test", "evil.test", "twoaddr.test", "fallback.test", "inspect.test")
	if err != nil {
		e.t.Fatal(err)
	}
	ln := listen(e.t, "127.0.0.1:0")
	srv := &http.Server{Handler: originHandler(nil), ErrorLog: quietLog, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}}
	go srv.ServeTLS(ln, "", "")
	e.t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func (e *env) startHTTPOrigin() int {
	ln := listen(e.t, "127.0.0.1:0")
	srv := &http.Server{Handler: originHandler(e.seen), ErrorLog: quietLog}
	go srv.Serve(ln)
	e.t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

var quietLog = log.New(io.Discard, "", 0)

var weights = bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB

func originHandler(seen chan http.Header) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/w.bin", func(w http.ResponseWriter, r *http.Request) { w.Write(weights) })
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	// /hold never answers: it waits for its request to end (the response
	// timeout's test).
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	// /drip streams 24 bytes, one each 50 ms (a stream that outlives a
	// short idle timeout while it moves bytes).
	mux.HandleFunc("/drip", func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 24 {
			w.Write([]byte("d"))
			http.NewResponseController(w).Flush()
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
	})
	// /stall sends its header and one byte, then nothing until its
	// request ends (the idle timeout's test).
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Seen-Host", r.Host)
		h.Set("X-Seen-Content-Length", fmt.Sprint(r.ContentLength))
		h.Set("X-Seen-TE", strings.Join(r.TransferEncoding, ","))
		body, _ := io.ReadAll(r.Body)
		h.Set("X-Seen-Body", string(body))
		if seen != nil {
			seen <- h
		}
		fmt.Fprintf(w, "echo %s %s", r.Method, r.URL.Path)
	})
	return mux
}

// dialFrom connects to addr from a given loopback source address.
func dialFrom(t testing.TB, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connect sends a CONNECT from src and returns the connection and response.
func (e *env) connect(src, target string) (net.Conn, *http.Response) {
	e.t.Helper()
	c := dialFrom(e.t, src, e.addr)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		e.t.Fatal(err)
	}
	return c, resp
}

// tlsGet runs a GET over a TLS client on c and returns the body.
func (e *env) tlsGet(c net.Conn, serverName, path string) (string, error) {
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: e.ca.CertPool(), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, serverName)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
