package main

// Credentials added by egressd (issue 28, docs/design.md "Credentials"),
// through `egressd run` with real clients: curl, python requests and Go,
// an origin that answers 401 without "Authorization: Bearer S" and 200
// with it, and a blob origin that logs every request's headers.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const credPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm-server}}
  egress:
  - hosts: [api.cred.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
    http:
    - methods: [GET, POST]
      paths: [/v1/chat, /v1/redirect]
    credential: {name: openai}
  - hosts: [blob.cred.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
  - hosts: [gone.cred.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
    credential: {name: never-existed, header: X-Api-Key, format: "{}"}
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: other, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: other}}
  egress:
  - hosts: [api.cred.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
`

// credSecret is the credential's value: '/', '+' and '=' so that its URL
// encoding differs from it.
const credSecret = "sk-TOPKEY/a+b=c-0123456789"

// credOrigin is the API origin and the blob origin on one TLS port: the
// API answers 200 only to "Authorization: Bearer <want>"; every request
// is logged with the Authorization values it carried.
type credOrigin struct {
	port string
	want atomic.Pointer[string]

	mu   sync.Mutex
	seen []originRequest
}

type originRequest struct {
	host, path string
	auth       []string
	apiKey     []string
}

func startCredOrigin(t *testing.T, w *inspectWorld) *credOrigin {
	t.Helper()
	o := &credOrigin{}
	s := credSecret
	o.want.Store(&s)
	cert, err := w.origin.Issue("api.cred.test", "blob.cred.test", "gone.cred.test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.Host)
			o.mu.Lock()
			o.seen = append(o.seen, originRequest{host: host, path: r.URL.Path, auth: r.Header.Values("Authorization"), apiKey: r.Header.Values("X-Api-Key")})
			o.mu.Unlock()
			switch {
			case host == "api.cred.test" && r.URL.Path == "/v1/redirect":
				http.Redirect(rw, r, "https://blob.cred.test:"+o.port+"/weights.bin", http.StatusFound)
			case host == "api.cred.test":
				if v := r.Header.Values("Authorization"); len(v) != 1 || v[0] != "Bearer "+*o.want.Load() {
					http.Error(rw, "no key", http.StatusUnauthorized)
					return
				}
				_, _ = io.WriteString(rw, "completion")
			default:
				_, _ = io.WriteString(rw, "blob")
			}
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return o
}

func (o *credOrigin) requests() []originRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]originRequest(nil), o.seen...)
}

// swapSecret writes keys as the kubelet updates a Secret volume: a new
// timestamped directory, ..data swapped to it by rename, each key a link
// through ..data (a deleted key's link removed).
func swapSecret(t *testing.T, dir string, gen int, keys map[string]string) {
	t.Helper()
	ts := fmt.Sprintf("..2026_12_02_07_00_%02d.%d", gen, gen)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		writeFile(t, filepath.Join(dir, ts, k), v)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"openai"} {
		link := filepath.Join(dir, k)
		_, want := keys[k]
		_, err := os.Lstat(link)
		switch {
		case want && err != nil:
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		case !want && err == nil:
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestEndToEndCredentials: every case of issue 28's Tests.
func TestEndToEndCredentials(t *testing.T) {
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required (scripts/deps/base.sh installs it)", tool)
		}
	}
	w := startInspectWorld(t)
	o := startCredOrigin(t, w)
	dir := t.TempDir()
	credDir := filepath.Join(dir, "credentials")
	if err := os.Mkdir(credDir, 0o755); err != nil {
		t.Fatal(err)
	}
	swapSecret(t, credDir, 1, map[string]string{"openai": credSecret + "\n"})
	policyFile, pods := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, policyFile, strings.ReplaceAll(credPolicy, "PORT", o.port))
	writeFile(t, pods, e2ePods)
	in := startEgressdArgs(t, w.world, "--policy", policyFile, "--pods", pods,
		"--inspect-ca-cert", w.icaCert, "--inspect-ca-key", w.key, "--upstream-ca", w.originCA,
		"--credentials-dir", credDir)
	api := "https://api.cred.test:" + o.port
	curl := func(from string, args ...string) string {
		t.Helper()
		full := append([]string{"-sS", "--max-time", "10", "--interface", from, "--cacert", w.icaCert,
			"--proxy", "http://" + in.proxy, "-o", "/dev/null", "-w", "%{http_code} %header{x-egressd-reason}"}, args...)
		out, err := exec.Command("curl", full...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	t.Run("selected pod without a key", func(t *testing.T) {
		for _, proto := range []string{"--http1.1", "--http2"} {
			if got := curl("127.0.0.2", proto, "-X", "POST", api+"/v1/chat"); got != "200" {
				t.Fatalf("%s: %q; want 200", proto, got)
			}
		}
	})
	t.Run("another policy's pod", func(t *testing.T) {
		if got := curl("127.0.0.3", api+"/v1/chat"); got != "401" {
			t.Fatalf("%q; want the origin's 401", got)
		}
	})
	t.Run("client value replaced", func(t *testing.T) {
		if got := curl("127.0.0.2", "-H", "Authorization: Bearer stolen-or-stale", api+"/v1/chat"); got != "200" {
			t.Fatalf("%q; want 200", got)
		}
		r := in.waitRecord(t, "the replaced exchange", func(r map[string]any) bool {
			h, _ := r["http"].(map[string]any)
			return r["kind"] == "inspected" && h["credential_replaced"] == true
		})
		if h := r["http"].(map[string]any); h["credential"] != "openai" || fmt.Sprint(h["status"]) != "200" {
			t.Fatalf("record %v", r)
		}
	})
	t.Run("redirect to the blob host", func(t *testing.T) {
		out, err := exec.Command("python3", "-c", pythonRequests, in.proxy, w.icaCert, api+"/v1/redirect").CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "200 blob" {
			t.Fatalf("python requests: %q; want the blob", got)
		}
		var blob int
		for _, r := range o.requests() {
			if r.host == "blob.cred.test" {
				blob++
				if len(r.auth) != 0 {
					t.Fatalf("the blob origin was sent Authorization (%d values)", len(r.auth))
				}
			}
		}
		if blob == 0 {
			t.Fatal("the blob origin saw no request")
		}
	})
	t.Run("HTTP/2 concurrent streams", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(mustRead(t, w.icaCert))
		tr := &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: in.proxy}),
			DialContext:     podDialer.DialContext,
			TLSClientConfig: &tls.Config{RootCAs: roots},

			ForceAttemptHTTP2: true,
		}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		// One request first, so that the others share its connection.
		if resp, err := c.Get(api + "/v1/chat"); err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("first request: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		before := len(o.requests())
		const n = 64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				resp, err := c.Post(api+"/v1/chat", "text/plain", strings.NewReader(fmt.Sprint(i)))
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
					errs <- fmt.Errorf("stream %d: %s %s", i, resp.Proto, resp.Status)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := o.requests()[before:]
		if len(got) != n {
			t.Fatalf("the origin saw %d requests; want %d", len(got), n)
		}
		for _, r := range got {
			if len(r.auth) != 1 {
				t.Fatalf("a stream carried %d Authorization values; want 1", len(r.auth))
			}
		}
	})
	t.Run("never-existing credential", func(t *testing.T) {
		if got := curl("127.0.0.2", "https://gone.cred.test:"+o.port+"/"); got != "503 credential-unavailable" {
			t.Fatalf("%q; want 503 credential-unavailable", got)
		}
		r := in.waitRecord(t, "the refused exchange", func(r map[string]any) bool {
			return r["kind"] == "inspected" && r["host"] == "gone.cred.test"
		})
		h, _ := r["http"].(map[string]any)
		if r["verdict"] != "deny" || r["reason"] != "credential-unavailable" || h["credential"] != "never-existed" || fmt.Sprint(h["status"]) != "503" {
			t.Fatalf("record %v", r)
		}
		for _, req := range o.requests() {
			if req.host == "gone.cred.test" {
				t.Fatal("a request without its credential reached the origin")
			}
		}
	})
	t.Run("rotation", func(t *testing.T) {
		const next = "sk-ROTATED/x+y=z"
		s := next
		o.want.Store(&s)
		swapSecret(t, credDir, 2, map[string]string{"openai": next + "\n"})
		// The reload interval is 20ms: the new value is used within it.
		// The loaded machine gets a generous bound.
		deadline := time.Now().Add(10 * time.Second)
		for curl("127.0.0.2", api+"/v1/chat") != "200" {
			if time.Now().After(deadline) {
				t.Fatal("the rotated value was not used within 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		checkNoCredential(t, in, next)
	})
	t.Run("deleted credential", func(t *testing.T) {
		swapSecret(t, credDir, 3, map[string]string{})
		deadline := time.Now().Add(10 * time.Second)
		for curl("127.0.0.2", api+"/v1/chat") != "503 credential-unavailable" {
			if time.Now().After(deadline) {
				t.Fatal("a deleted credential was still added after 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// The records count: credential-unavailable is counted like every
	// other reason.
	if got := in.metric(t, `egressd_requests_total{kind="inspected",probe="false",reason="credential-unavailable",verdict="deny"}`); got < 2 {
		t.Errorf("egressd_requests_total for credential-unavailable = %v; want at least 2", got)
	}
	checkNoCredential(t, in, credSecret)
}

// checkNoCredential fails when a record, a log line or a metric of in
// holds the value, its base64 or its URL encoding.
func checkNoCredential(t *testing.T, in *instance, value string) {
	t.Helper()
	resp, err := http.Get("http://" + in.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	forms := []string{value, base64.StdEncoding.EncodeToString([]byte(value)),
		base64.RawURLEncoding.EncodeToString([]byte(value)), url.QueryEscape(value), url.PathEscape(value),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + value))}
	for name, s := range map[string]string{"records": in.audit.String(), "log": in.logs.String(), "metrics": string(metrics)} {
		for _, f := range forms {
			if strings.Contains(s, f) {
				t.Fatalf("the %s hold the credential (as %q)", name, f)
			}
		}
	}
}

// pythonRequests fetches argv[3] with python requests through the proxy
// argv[1], from the selected pod's address, trusting argv[2], following
// redirects; prints the final status and body.
const pythonRequests = `
import sys, requests
from requests.adapters import HTTPAdapter
class FromPod(HTTPAdapter):
    def init_poolmanager(self, *a, **k):
        k["source_address"] = ("127.0.0.2", 0)
        return super().init_poolmanager(*a, **k)
    def proxy_manager_for(self, proxy, **k):
        k["source_address"] = ("127.0.0.2", 0)
        return super().proxy_manager_for(proxy, **k)
s = requests.Session()
s.mount("https://", FromPod())
s.trust_env = False
r = s.get(sys.argv[3], proxies={"https": "http://" + sys.argv[1]}, verify=sys.argv[2], timeout=10)
print(r.status_code, r.text)
`
