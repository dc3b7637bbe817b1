package main

// More of inspection through `egressd run` (issue 19 "Tests"): origins
// whose certificate is expired or not yet valid, python's http.client over
// an inspected rule, and Host/:authority naming another site on a later
// request of one tunnel, over HTTP/1.1 and HTTP/2 from a Go client.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/egressd/egressd/certs"
)

// startInspectedEgressd runs `egressd run` with the inspect world's CA
// flags, inspectE2EPolicy and extra YAML rules appended to its egress
// list (PORT replaced by the inspect world's port).
func startInspectedEgressd(t *testing.T, w *inspectWorld, extraRules string) *instance {
	t.Helper()
	dir := t.TempDir()
	policyFile, pods := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, policyFile, strings.ReplaceAll(inspectE2EPolicy+extraRules, "PORT", w.port))
	writeFile(t, pods, e2ePods)
	return startEgressdArgs(t, w.world, "--policy", policyFile, "--pods", pods,
		"--inspect-ca-cert", w.icaCert, "--inspect-ca-key", w.key, "--upstream-ca", w.originCA)
}

// checkNoSecrets fails when a record or a log line of in holds the
// inspection CA's key or a query string the test sent or the origin
// redirected to.
func checkNoSecrets(t *testing.T, in *instance, w *inspectWorld) {
	t.Helper()
	keyBody := bytes.Split(w.keyPEM, []byte("\n"))[1]
	for name, s := range map[string]string{"records": in.audit.String(), "log": in.logs.String()} {
		if strings.Contains(s, string(keyBody)) || strings.Contains(s, "TOPSECRET") {
			t.Fatalf("the %s hold the CA key or a query string", name)
		}
	}
}

// podDialer dials from the selected pod's address, 127.0.0.2.
var podDialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}

// TestEndToEndInspectedOriginCertTimes: an origin whose certificate has
// expired, or is not valid yet, is refused upstream-tls-failed with the
// verifier's class in error; neither curl nor a Go client sees a
// certificate of the origin's CA, and the origin gets no request.
func TestEndToEndInspectedOriginCertTimes(t *testing.T) {
	w := startInspectWorld(t)
	// The origin CA of the inspect world (--upstream-ca) issued both
	// certificates: only their times are wrong.
	pemBytes := mustRead(t, w.originCA)
	originCA := w.origin
	now := time.Now()
	expired, err := originCA.IssueWith(certs.LeafConfig{Hosts: []string{"expired.test"}, Now: now.Add(-72 * time.Hour), Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	notYet, err := originCA.IssueWith(certs.LeafConfig{Hosts: []string{"notyet.test"}, Now: now.Add(72 * time.Hour), Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if h.ServerName == "notyet.test" {
				return &notYet, nil
			}
			return &expired, nil
		}},
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			_, _ = io.WriteString(rw, "must not be seen")
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	in := startInspectedEgressd(t, w, `  - hosts: [expired.test, notyet.test]
    ports: [`+port+`]
    cidrs: [127.0.0.0/8]
    inspect: true
`)
	originPool := x509.NewCertPool()
	originPool.AppendCertsFromPEM(pemBytes)
	for _, c := range []struct{ host, class string }{{"expired.test", "expired"}, {"notyet.test", "not-yet-valid"}} {
		t.Run(c.host, func(t *testing.T) {
			target := "https://" + c.host + ":" + port + "/?q=TOPSECRET"
			// curl trusts the inspection CA and the origin's CA: a
			// certificate of either would be accepted, so a failure
			// means none was presented.
			both := filepath.Join(t.TempDir(), "both.pem")
			ica, err := os.ReadFile(w.icaCert)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(both, append(ica, pemBytes...), 0o600); err != nil {
				t.Fatal(err)
			}
			if code, body, stderr := in.curlRaw(t, w.world, "127.0.0.2", "--proxy", "http://"+in.proxy, "--cacert", both, target); code == 0 || body != "" {
				t.Fatalf("curl: exit %d body %q (%s): want a refusal", code, body, stderr)
			}
			// The Go client records every certificate it is shown.
			var shown atomic.Int64
			tr := &http.Transport{
				Proxy:       http.ProxyURL(&url.URL{Scheme: "http", Host: in.proxy}),
				DialContext: podDialer.DialContext,
				TLSClientConfig: &tls.Config{RootCAs: originPool, InsecureSkipVerify: true, //nolint:gosec // the test looks at what it is shown
					VerifyConnection: func(cs tls.ConnectionState) error {
						shown.Add(int64(len(cs.PeerCertificates)))
						for _, pc := range cs.PeerCertificates {
							if pc.Issuer.CommonName == originCA.Certificate().Subject.CommonName {
								return fmt.Errorf("shown the origin's certificate %s", pc.Subject)
							}
						}
						return nil
					}},
			}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(target)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("Go client: status %d; want a refusal", resp.StatusCode)
			}
			if strings.Contains(err.Error(), "shown the origin's certificate") {
				t.Fatal(err)
			}
			if shown.Load() != 0 {
				t.Errorf("the Go client was shown %d certificates (%v); want none", shown.Load(), err)
			}
			// One refusal each for curl and the Go client.
			for _, r := range in.waitRecords(t, c.host+" refused", 2, hostIs("connect", c.host, "allow")) {
				if r["outcome"] != "upstream-tls-failed" || !strings.Contains(fmt.Sprint(r["error"]), c.class) {
					t.Errorf("record %v: want outcome upstream-tls-failed, error with %q", r, c.class)
				}
			}
		})
	}
	if served.Load() != 0 {
		t.Errorf("the origin served %d requests", served.Load())
	}
	checkNoSecrets(t, in, w)
}

// exchanges waits for the record of a three-request inspected tunnel to
// api.test (with ALPN alpn, unless empty) and returns each of its
// exchanges (kind inspected, tunnel = its id) as line makes it of the
// record and its http object.
func (in *instance) exchanges(t *testing.T, alpn string, line func(r, h map[string]any) string) []string {
	t.Helper()
	tun := in.waitRecord(t, "the api.test tunnel "+alpn, func(r map[string]any) bool {
		tl, _ := r["tls"].(map[string]any)
		return r["kind"] == "connect" && r["host"] == "api.test" && r["requests"] != nil && (alpn == "" || tl["alpn"] == alpn)
	})
	if tun["requests"] != float64(3) {
		t.Fatalf("tunnel requests %v; want 3: %v", tun["requests"], tun)
	}
	var got []string
	for _, r := range in.records(t) {
		if r["kind"] == "inspected" && r["tunnel"] == tun["id"] {
			h, _ := r["http"].(map[string]any)
			got = append(got, line(r, h))
		}
	}
	return got
}

// waitRecords waits until n records match f, and returns them.
func (in *instance) waitRecords(t *testing.T, what string, n int, f func(map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = got[:0]
		for _, r := range in.records(t) {
			if f(r) {
				got = append(got, r)
			}
		}
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("%d audit records %s; want %d; have:\n%s", len(got), what, n, in.audit.String())
	return nil
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pythonClient: one http.client connection through the proxy's CONNECT
// tunnel (set_tunnel) from the pod's address, trusting the inspection CA
// through an SSLContext, three requests in the one tunnel; it prints
// status, X-Egressd-Reason and the redirect target's host per request.
const pythonClient = `
import http.client, ssl, sys, urllib.parse
proxy_host, proxy_port, host, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
ctx = ssl.create_default_context(cafile=cafile)
conn = http.client.HTTPSConnection(proxy_host, proxy_port, context=ctx, source_address=("127.0.0.2", 0), timeout=10)
conn.set_tunnel(host, port)
for path in sys.argv[6:]:
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    loc = r.getheader("Location")
    print(r.status, r.getheader("X-Egressd-Reason") or "-", urllib.parse.urlsplit(loc).hostname if loc else "-")
print("tls", conn.sock.version(), conn.sock.getpeercert()["issuer"])
`

// TestEndToEndInspectedPython: python3's http.client with the inspection
// CA in an SSLContext, over an inspected rule: an allowed path, a denied
// path and a redirect in one tunnel, each recorded as an exchange of it.
func TestEndToEndInspectedPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is required (scripts/deps/base.sh installs it)")
	}
	w := startInspectWorld(t)
	in := startInspectedEgressd(t, w, "")
	host, pport, _ := net.SplitHostPort(in.proxy)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", pythonClient, host, pport, "api.test", w.port, w.icaCert,
		"/v1/models", "/v1/files?key=TOPSECRET", "/dl?x=TOPSECRET").CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"200 - -", "403 path-not-allowed -", "302 - eu1.blob.test"}
	if len(lines) != 4 || strings.Join(lines[:3], "|") != strings.Join(want, "|") {
		t.Fatalf("python3 printed:\n%s\nwant %q and the TLS line", out, want)
	}
	if !strings.Contains(lines[3], "inspect e2e egressd CA") {
		t.Errorf("python3 was not shown egressd's leaf: %s", lines[3])
	}
	got := in.exchanges(t, "", func(r, h map[string]any) string {
		return fmt.Sprintf("%v %v %v %v", h["method"], h["status"], r["reason"], h["redirect_host"])
	})
	wantRec := []string{"GET 200 allowed <nil>", "GET 403 path-not-allowed <nil>", "GET 302 allowed eu1.blob.test"}
	if strings.Join(got, "|") != strings.Join(wantRec, "|") {
		t.Fatalf("exchanges %q; want %q", got, wantRec)
	}
	checkNoSecrets(t, in, w)
}

// TestEndToEndInspectedHostMismatchLater: in one inspected tunnel to
// api.test, the first request is allowed, the second names another site
// in Host (HTTP/1.1) or :authority (HTTP/2) and is refused 403
// host-mismatch inside the tunnel, and the third, good again, is allowed:
// the tunnel stays up. Through the proxy of `egressd run`.
func TestEndToEndInspectedHostMismatchLater(t *testing.T) {
	w := startInspectWorld(t)
	in := startInspectedEgressd(t, w, "")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, w.icaCert))
	good := "api.test:" + w.port
	hosts := []string{good, "models.test:" + w.port, good}
	for _, proto := range []struct{ name, alpn string }{{"HTTP/1.1", "http/1.1"}, {"HTTP/2.0", "h2"}} {
		t.Run(proto.alpn, func(t *testing.T) {
			tc := connectTunnel(t, in.proxy, good, &tls.Config{ServerName: "api.test", RootCAs: roots, NextProtos: []string{proto.alpn}})
			if got := tc.ConnectionState().NegotiatedProtocol; got != proto.alpn {
				t.Fatalf("ALPN %q; want %q", got, proto.alpn)
			}
			var do func(req *http.Request) (*http.Response, error)
			if proto.alpn == "h2" {
				cc, err := (&http2.Transport{}).NewClientConn(tc)
				if err != nil {
					t.Fatal(err)
				}
				do = cc.RoundTrip
			} else {
				br := bufio.NewReader(tc)
				do = func(req *http.Request) (*http.Response, error) {
					if err := req.Write(tc); err != nil {
						return nil, err
					}
					return http.ReadResponse(br, req)
				}
			}
			for i, h := range hosts {
				req, err := http.NewRequest("GET", "https://"+good+"/v1/models?k=TOPSECRET", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = h
				resp, err := do(req)
				if err != nil {
					t.Fatalf("request %d (Host %s): %v", i, h, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				wantStatus, wantReason := 200, ""
				if h != good {
					wantStatus, wantReason = 403, "host-mismatch"
				}
				if resp.StatusCode != wantStatus || resp.Header.Get("X-Egressd-Reason") != wantReason {
					t.Fatalf("request %d (Host %s): %d %q; want %d %q", i, h, resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), wantStatus, wantReason)
				}
			}
			_ = tc.Close()
			got := in.exchanges(t, proto.alpn, func(r, h map[string]any) string {
				return fmt.Sprintf("%v %v %v %v", h["proto"], h["status"], r["verdict"], r["reason"])
			})
			want := []string{proto.name + " 200 allow allowed", proto.name + " 403 deny host-mismatch", proto.name + " 200 allow allowed"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("exchanges %q; want %q", got, want)
			}
		})
	}
	checkNoSecrets(t, in, w)
}

// connectTunnel opens a CONNECT tunnel to target through proxy from the
// pod's address and starts TLS in it with cfg.
func connectTunnel(t *testing.T, proxy, target string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := podDialer.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || br.Buffered() != 0 {
		t.Fatalf("CONNECT %s: %d (%d bytes buffered)", target, resp.StatusCode, br.Buffered())
	}
	tc := tls.Client(c, cfg)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS in the tunnel to %s: %v", target, err)
	}
	return tc
}
