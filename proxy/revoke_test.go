package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// setPolicy replaces the env's policy with its test policy plus extra rules,
// as a reload does; open connections keep their decision until Revalidate.
func (e *env) setPolicy(t testing.TB, extra string) {
	t.Helper()
	e.snap.Store(compile(t, e.policyYAML(extra)))
}

// setPods replaces the identities of the env's store.
func (e *env) setPods(pods ...*corev1.Pod) { e.store.Replace(pods) }

var (
	llmPod = func() *corev1.Pod {
		return testutil.RunningPod("llm-prod", "llm-0", "llm-server", podIP, map[string]string{"app": "llm"})
	}
	webPod = func() *corev1.Pod {
		return testutil.RunningPod("web", "web-0", "default", otherIP, map[string]string{"app": "web"})
	}
)

// flipSource is an identity source whose clients a test edits (the pod's
// Initialized condition).
type flipSource struct {
	mu      sync.Mutex
	clients map[netip.Addr]policy.Client
}

func (s *flipSource) Lookup(ip netip.Addr) (*policy.Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[ip.Unmap()]
	return &c, ok
}

func (s *flipSource) initialized() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ip, c := range s.clients {
		c.Initialized = true
		s.clients[ip] = c
	}
}

// openTLS makes a CONNECT from src and a TLS handshake through it; the
// connection stays open.
func (e *env) openTLS(t *testing.T, src, target, sni string) *tls.Conn {
	t.Helper()
	c, resp := e.connect(src, target)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: e.ca.CertPool(), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// get sends one GET on an open TLS connection and reads the answer.
func get(tc *tls.Conn, host string) error {
	fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// TestRevokeTunnel: a change of policy or identity closes the open tunnels
// that the new snapshot no longer allows within a second, with outcome
// revoked and the new decision in the record; audit mode keeps them open
// with would_deny; tunnels still allowed are untouched.
func TestRevokeTunnel(t *testing.T) {
	evilRule := "  - hosts: [\"evil.test\"]\n    ports: [{tls}]\n    cidrs: [\"127.0.0.0/8\"]\n"
	initRule := evilRule + "    phase: init\n"
	for _, tc := range []struct {
		name      string
		mode      policy.Mode
		init      bool // identities from a flipSource, the pod not yet initialized
		rules     string
		change    func(e *env, src *flipSource)
		revoked   bool
		verdict   string
		reason    string
		wouldDeny bool
	}{
		{"rule removed", "", false, evilRule, func(e *env, _ *flipSource) { e.setPolicy(t, "") }, true, "deny", "not-allowlisted", false},
		{"pod deleted", "", false, evilRule, func(e *env, _ *flipSource) { e.setPods(webPod()) }, true, "deny", "unknown-client", false},
		{"pod relabelled", "", false, evilRule, func(e *env, _ *flipSource) {
			p := llmPod()
			p.Labels = map[string]string{"app": "other"}
			e.setPods(p, webPod())
		}, true, "deny", "not-allowlisted", false},
		{"IP reused by a pod of another namespace", "", false, evilRule, func(e *env, _ *flipSource) {
			e.setPods(testutil.RunningPod("web", "web-1", "default", podIP, map[string]string{"app": "web"}), webPod())
		}, true, "deny", "not-allowlisted", false},
		{"init finished: phase init rule", "", true, initRule, func(_ *env, s *flipSource) { s.initialized() }, true, "deny", "init-only", false},
		{"rule moved to another port", "", false, evilRule, func(e *env, _ *flipSource) {
			e.setPolicy(t, "  - hosts: [\"evil.test\"]\n    ports: [{http}]\n    cidrs: [\"127.0.0.0/8\"]\n")
		}, true, "deny", "port-not-allowed", false},
		{"cidrs dropped: the peer is private", "", false, evilRule, func(e *env, _ *flipSource) {
			e.setPolicy(t, "  - hosts: [\"evil.test\"]\n    ports: [{tls}]\n")
		}, true, "deny", "private-address", false},
		{"audit mode: stays open, would_deny", policy.ModeAudit, false, evilRule, func(e *env, _ *flipSource) { e.setPolicy(t, "") }, false, "allow", "not-allowlisted", true},
		{"audit mode: a deleted pod is cut all the same", policy.ModeAudit, false, evilRule, func(e *env, _ *flipSource) { e.setPods(webPod()) }, true, "deny", "unknown-client", false},
		{"another rule changed: untouched", "", false, evilRule, func(e *env, _ *flipSource) {
			e.setPolicy(t, evilRule+"  - hosts: [\"new.test\"]\n    ports: [443]\n")
		}, false, "allow", "allowed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := envOpt{mode: tc.mode, extra: tc.rules}
			var src *flipSource
			if tc.init {
				src = &flipSource{clients: map[netip.Addr]policy.Client{
					netip.MustParseAddr(podIP): {IP: netip.MustParseAddr(podIP), Namespace: "llm-prod", Pod: "llm-0",
						ServiceAccount: "llm-server", Labels: map[string]string{"app": "llm"}},
				}}
				o.identity = src
			}
			e := newEnv(t, o)
			tlc := e.openTLS(t, podIP, fmt.Sprintf("evil.test:%d", e.tlsPort), "evil.test")
			if err := get(tlc, "evil.test"); err != nil {
				t.Fatal(err)
			}
			tc.change(e, src)
			start := time.Now()
			e.p.Revalidate()
			if tc.revoked {
				tlc.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
				if _, err := tlc.Read(make([]byte, 1)); err == nil {
					t.Fatal("read on a revoked tunnel")
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("closed %v after Revalidate, want within a second", d)
				}
			} else {
				e.p.revalidate() // the pass has run once Revalidate's has too
				if err := get(tlc, "evil.test"); err != nil {
					t.Fatalf("tunnel cut: %v", err)
				}
				tlc.Close()
			}
			r := e.sink.next(t)
			wantOutcome := record.OutcomeOK
			if tc.revoked {
				wantOutcome = record.OutcomeRevoked
			}
			if r.Outcome != wantOutcome || r.Verdict != tc.verdict || r.Reason != tc.reason || r.WouldDeny != tc.wouldDeny {
				t.Fatalf("record outcome %q verdict %q reason %q would_deny %v error %q", r.Outcome, r.Verdict, r.Reason, r.WouldDeny, r.Error)
			}
			if tc.revoked && !strings.Contains(r.Error, "revoked") {
				t.Fatalf("error %q", r.Error)
			}
			if r.Client.Pod != "llm-0" || r.BytesReceived == 0 || r.TLS == nil || r.TLS.Result != "established" {
				t.Fatalf("record client %+v bytes %d tls %+v", r.Client, r.BytesReceived, r.TLS)
			}
		})
	}
}

// TestRevokeSNITunnel: a transparent TLS connection is revoked like a
// CONNECT tunnel.
func TestRevokeSNITunnel(t *testing.T) {
	e := newEnv(t, envOpt{extra: "  - hosts: [\"evil.test\"]\n    ports: [{tls}]\n    cidrs: [\"127.0.0.0/8\"]\n"})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeSNI(ln, e.tlsPort)
	c := dialFrom(t, podIP, ln.Addr().String())
	tlc := tls.Client(c, &tls.Config{ServerName: "evil.test", RootCAs: e.ca.CertPool(), NextProtos: []string{"http/1.1"}})
	if err := get(tlc, "evil.test"); err != nil {
		t.Fatal(err)
	}
	e.setPolicy(t, "")
	e.p.Revalidate()
	tlc.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
	if _, err := tlc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a revoked connection")
	}
	r := e.sink.next(t)
	if r.Kind != record.KindSNI || r.Outcome != record.OutcomeRevoked || r.Verdict != "deny" || r.Reason != "not-allowlisted" {
		t.Fatalf("record kind %q outcome %q verdict %q reason %q", r.Kind, r.Outcome, r.Verdict, r.Reason)
	}
}

// TestRevokeHTTPRequest: a plain HTTP response still streaming (an SSE
// token stream) is cut when its rule goes, and its kept-alive client
// connection with it.
func TestRevokeHTTPRequest(t *testing.T) {
	origin := listen(t, "127.0.0.1:0")
	port := origin.Addr().(*net.TCPAddr).Port
	release := make(chan struct{})
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: first\n"))
		_ = http.NewResponseController(w).Flush()
		select { // the stream never ends on its own
		case <-r.Context().Done():
		case <-release:
		}
	})}
	go srv.Serve(origin)
	t.Cleanup(func() { close(release); srv.Close() })
	e := newEnv(t, envOpt{extra: fmt.Sprintf("  - hosts: [\"evil.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", port)})

	c := dialFrom(t, podIP, e.addr)
	fmt.Fprintf(c, "GET http://evil.test:%d/stream HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	e.setPolicy(t, "")
	start := time.Now()
	e.p.Revalidate()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
	if _, err := io.Copy(io.Discard, br); err != nil && isTimeout(err) {
		t.Fatal("the stream went on after its rule was removed")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("closed %v after Revalidate", d)
	}
	r := e.sink.next(t)
	if r.Kind != record.KindHTTP || r.Outcome != record.OutcomeRevoked || r.Verdict != "deny" || r.Reason != "not-allowlisted" || r.Host != "evil.test" {
		t.Fatalf("record kind %q outcome %q verdict %q reason %q host %q error %q", r.Kind, r.Outcome, r.Verdict, r.Reason, r.Host, r.Error)
	}
}

// lookupFunc is a Lookuper from a function.
type lookupFunc func(ctx context.Context, host string) (resolver.Answer, error)

func (f lookupFunc) LookupIP(ctx context.Context, host string) (resolver.Answer, error) {
	return f(ctx, host)
}

// TestRevokeRace: a change announced while a tunnel is between its
// decision and its admission is applied to it all the same: the pass
// cannot see it yet, so the tunnel decides itself again when it starts.
func TestRevokeRace(t *testing.T) {
	var e *env
	ready := make(chan struct{})
	look := lookupFunc(func(ctx context.Context, host string) (resolver.Answer, error) {
		// Decided under the old policy; the change and its pass happen
		// during the lookup, before the tunnel is admitted.
		<-ready
		e.setPolicy(t, "")
		e.p.Revalidate()
		e.p.revalidate()
		return resolver.Answer{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, nil
	})
	e = newEnv(t, envOpt{lookup: look, extra: "  - hosts: [\"evil.test\"]\n    ports: [{tls}]\n    cidrs: [\"127.0.0.0/8\"]\n"})
	close(ready)
	c, resp := e.connect(podIP, fmt.Sprintf("evil.test:%d", e.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a tunnel decided under the old policy")
	}
	r := e.sink.next(t)
	if r.Outcome != record.OutcomeRevoked || r.Reason != "not-allowlisted" {
		t.Fatalf("record outcome %q reason %q", r.Outcome, r.Reason)
	}
}
