package inspect

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/policy"
)

// The test harness plays the proxy's part: it accepts CONNECT on a
// loopback listener, answers 200, dials the one origin (an httptest TLS
// server with a certificate of an origin CA), decides the tunnel and each
// request with a real policy snapshot, and hands both connections to the
// engine. Records and errors are collected for the assertions.

const testHost = "api.llm.example"

// inspectPolicy is the rule under test: POST on two paths, GET on the
// models, GET and HEAD on downloads, anything on /status/*.
func inspectPolicy(t testing.TB) *policy.Snapshot {
	t.Helper()
	r := policy.EgressRule{Hosts: []string{testHost}, Ports: []int32{443}, Inspect: true, HTTP: []policy.HTTPRule{
		{Methods: []string{"POST"}, Paths: []string{"/v1/chat/completions", "/v1/responses"}},
		{Methods: []string{"GET"}, Paths: []string{"/v1/models", "/v1/models/*"}},
		{Methods: []string{"GET", "HEAD"}, Paths: []string{"/dl/**"}},
		{Paths: []string{"/status/*"}},
	}}
	d := policy.Document{Origin: "test", Policy: policy.EgressPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policy.APIVersion, Kind: policy.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "llm"},
		Spec:       policy.EgressPolicySpec{Egress: []policy.EgressRule{r}},
	}}
	s, err := policy.CompileWith([]policy.Document{d}, policy.ValidateOptions{InspectAvailable: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// originHandler answers like an API and an artifact store.
func originHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if n, _ := io.Copy(io.Discard, r.Body); n > 0 {
			w.Header().Set("X-Body-Bytes", strconv.FormatInt(n, 10))
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "origin-set-cookie-secret"})
		w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"models":[]}`)) })
	mux.HandleFunc("/v1/models/auth", func(w http.ResponseWriter, r *http.Request) {
		// A test origin may echo it: the assertions need the values.
		w.Header().Set("X-Auth", strings.Join(r.Header.Values("Authorization"), "|"))
	})
	mux.HandleFunc("/dl/weights.bin", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://blob.example.net/container/weights.bin?sig=signed-url-secret", http.StatusFound)
	})
	mux.HandleFunc("/dl/relative", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/dl/weights.bin")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	mux.HandleFunc("/dl/ambiguous", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"/\\evil.example/weights.bin"}
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/dl/forbidden", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "expired", http.StatusForbidden) })
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Path[len("/status/"):])
		w.WriteHeader(code)
	})
	return mux
}

type harness struct {
	t        testing.TB
	inspCA   *testCA // the inspection CA workloads trust
	originCA *testCA
	origin   *httptest.Server
	proxy    net.Listener
	engine   *Engine
	snap     *policy.Snapshot
	cred     []string

	mu           sync.Mutex
	upstreamAddr string // the origin dialled instead of h.origin's (setRawOrigin)
	exchanges    []ExchangeRecord[policy.Decision]
	tunnels      []Tunnel
	errs         []error
	done         sync.WaitGroup
}

type harnessOpts struct {
	originCert func(*x509.Certificate) // edits the origin's certificate
	originName string                  // the origin certificate's name; "" is testHost
	untrusted  bool                    // the engine does not trust the origin CA
	h1Only     bool                    // the origin speaks HTTP/1.1 only
	recordPath bool
	credential []string // set as Authorization on every allowed request
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, inspCA: newTestCA(t, "egressd inspection CA", nil), originCA: newTestCA(t, "origin CA", nil), snap: inspectPolicy(t), cred: o.credential}
	name := o.originName
	if name == "" {
		name = testHost
	}
	chain, key := h.originCA.issue(t, o.originCert, name)
	h.origin = httptest.NewUnstartedServer(originHandler())
	h.origin.EnableHTTP2 = !o.h1Only
	h.origin.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point of some tests
	h.origin.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}}}
	h.origin.StartTLS()
	t.Cleanup(h.origin.Close)

	leaves, err := NewLeaves(h.inspCA.load(t), LeafConfig{})
	if err != nil {
		t.Fatal(err)
	}
	roots := h.originCA.pool()
	if o.untrusted {
		roots = x509.NewCertPool()
	}
	if h.engine, err = New(Config{Leaves: leaves, Roots: roots, RecordPath: o.recordPath}); err != nil {
		t.Fatal(err)
	}
	if h.proxy, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		h.proxy.Close()
		h.done.Wait()
	})
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		for {
			c, err := h.proxy.Accept()
			if err != nil {
				return
			}
			h.done.Add(1)
			go func() {
				defer h.done.Done()
				h.serve(ctx, c)
			}()
		}
	}()
	return h
}

// bufConn replays what a bufio.Reader read ahead of the CONNECT head.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (h *harness) serve(ctx context.Context, c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		c.Close()
		return
	}
	host, portStr, _ := net.SplitHostPort(req.Host)
	port, _ := strconv.Atoi(portStr)
	client := &policy.Client{Namespace: "prod", Pod: "llm-0"}
	tunnel := h.snap.Decide(policy.DecideArgs{Client: client, Host: host, Port: 443})
	if !h.snap.Inspects(tunnel) {
		c.Write([]byte("HTTP/1.1 403 Forbidden\r\nX-Egressd-Reason: " + string(tunnel.Reason) + "\r\nContent-Length: 0\r\n\r\n"))
		c.Close()
		return
	}
	h.mu.Lock()
	addr := h.upstreamAddr
	h.mu.Unlock()
	if addr == "" {
		addr = h.origin.Listener.Addr().String()
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		c.Close()
		return
	}
	c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	tr, err := Serve(ctx, h.engine, Args[policy.Decision]{
		Client: &bufConn{Conn: c, r: br}, Upstream: up, Host: host, Port: port,
		Decide: func(r Request) Verdict[policy.Decision] {
			d := h.snap.DecideRequest(tunnel, r.Method, r.Target)
			if r.HostMismatch {
				d = tunnel.Deny(policy.ReasonHostMismatch)
			}
			v := Verdict[policy.Decision]{Allow: d.Allowed(), Reason: string(d.Reason), Decision: d}
			if v.Allow && h.cred != nil {
				v.SetHeader, v.SetValue = "Authorization", h.cred
			}
			return v
		},
		Record: func(x ExchangeRecord[policy.Decision]) {
			h.mu.Lock()
			h.exchanges = append(h.exchanges, x)
			h.mu.Unlock()
		},
	})
	h.mu.Lock()
	h.tunnels = append(h.tunnels, tr)
	if err != nil {
		h.errs = append(h.errs, err)
	}
	h.mu.Unlock()
}

// wait closes the harness's listener and waits for every tunnel to end.
func (h *harness) wait() {
	h.proxy.Close()
	h.done.Wait()
}

// records returns every record and error as JSON lines, for greps.
func (h *harness) records() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, x := range h.exchanges {
		b, _ := json.Marshal(x)
		out = append(out, string(b))
	}
	for _, x := range h.tunnels {
		b, _ := json.Marshal(x)
		out = append(out, string(b))
	}
	for _, e := range h.errs {
		out = append(out, e.Error())
	}
	return out
}

// originURL is the URL clients ask for: the tunnel host on the origin's
// port (the harness dials the origin whatever the name).
func (h *harness) originURL(path string) string {
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	return "https://" + net.JoinHostPort(testHost, port) + path
}

// goClient returns an HTTP client through the harness that trusts the
// inspection CA; h2 selects HTTP/2 (else HTTP/1.1 only).
func (h *harness) goClient(h2 bool) *http.Client {
	proxyURL, _ := url.Parse("http://" + h.proxy.Addr().String())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: h.inspCA.pool()},
		IdleConnTimeout: 5 * time.Second,
	}
	if h2 {
		tr.ForceAttemptHTTP2 = true
	} else {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	h.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// exchangesFor returns the recorded exchanges of method and status.
func (h *harness) exchangesFor(method string) []ExchangeRecord[policy.Decision] {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ExchangeRecord[policy.Decision]
	for _, x := range h.exchanges {
		if x.Method == method {
			out = append(out, x)
		}
	}
	return out
}
