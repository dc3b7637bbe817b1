package main

// End-to-end inspection: `egressd run` with --inspect-ca-cert,
// --inspect-ca-key and --upstream-ca, curl --cacert through it over
// HTTP/1.1 and HTTP/2, an origin of its own that speaks both.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/certs"
)

const inspectE2EPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm-server}}
  egress:
  - hosts: [api.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
    http:
    - methods: [GET]
      paths: [/v1/models, /dl, /missing, /forbidden]
  - hosts: [wrongname.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    inspect: true
  - hosts: [models.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
`

// inspectWorld is an origin for api.test and models.test (not
// wrongname.test) speaking h2 and http/1.1, the CA that issued its
// certificate, and the inspection CA, all as files.
type inspectWorld struct {
	*world
	port                   string
	origin                 *certs.CA // issued the origin's certificate; its PEM is originCA
	originCA, icaCert, key string
	keyPEM                 []byte
}

func startInspectWorld(t *testing.T) *inspectWorld {
	t.Helper()
	w := &inspectWorld{world: startWorld(t)}
	dir := t.TempDir()
	origin, err := certs.NewCA("inspect e2e origin CA")
	if err != nil {
		t.Fatal(err)
	}
	ica, err := certs.NewCA("inspect e2e egressd CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := origin.Issue("api.test", "models.test")
	if err != nil {
		t.Fatal(err)
	}
	w.origin = origin
	w.originCA, w.icaCert, w.key = filepath.Join(dir, "origin.pem"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	w.keyPEM = ica.KeyPEM()
	for f, b := range map[string][]byte{w.originCA: origin.CertPEM(), w.icaCert: ica.CertPEM(), w.key: w.keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, w.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/dl":
				http.Redirect(rw, r, "https://eu1.blob.test:"+w.port+"/weights.bin?sig=TOPSECRET", http.StatusFound)
			case "/missing":
				http.NotFound(rw, r)
			case "/forbidden":
				http.Error(rw, "storage says no", http.StatusForbidden)
			default:
				_, _ = io.WriteString(rw, "models list")
			}
		}),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

// TestEndToEndInspection: in one inspected tunnel per protocol, an allowed
// path, a denied path and a denied method, a redirect recorded with its
// target host, a 404 and a 403 of the origin recorded with their status;
// an origin whose certificate does not name the host is refused
// upstream-tls-failed; a blind rule's host shows the origin's own
// certificate; the CA key is in no record and no log line.
func TestEndToEndInspection(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required (scripts/deps installs it)")
	}
	w := startInspectWorld(t)
	dir := t.TempDir()
	policyFile, pods := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, policyFile, strings.ReplaceAll(inspectE2EPolicy, "PORT", w.port))
	writeFile(t, pods, e2ePods)
	in := startEgressdArgs(t, w.world, "--policy", policyFile, "--pods", pods,
		"--inspect-ca-cert", w.icaCert, "--inspect-ca-key", w.key, "--upstream-ca", w.originCA)

	steps := []struct {
		method, path, status, reason, redirect string
	}{
		{"GET", "/v1/models", "200", "allowed", ""},
		{"GET", "/v1/files", "403", "path-not-allowed", ""},
		{"POST", "/v1/models", "403", "method-not-allowed", ""},
		{"GET", "/dl?x=TOPSECRET", "302", "allowed", "eu1.blob.test"},
		{"GET", "/missing", "404", "allowed", ""},
		{"GET", "/forbidden", "403", "allowed", ""},
	}
	for _, proto := range []struct{ flag, name string }{{"--http1.1", "HTTP/1.1"}, {"--http2", "HTTP/2.0"}} {
		// One curl run, one connection: --next keeps curl's connection
		// pool, so every request after the first goes through the same
		// tunnel.
		var args []string
		for i, s := range steps {
			if i > 0 {
				args = append(args, "--next")
			}
			args = append(args, "-sS", "--max-time", "10", "--interface", "127.0.0.2", "--cacert", w.icaCert,
				"--proxy", "http://"+in.proxy, proto.flag, "-o", "/dev/null", "-w", "%{http_code}\n",
				"-X", s.method, "https://api.test:"+w.port+s.path)
		}
		out, err := exec.Command("curl", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: curl: %v\n%s", proto.name, err, out)
		}
		var want []string
		for _, s := range steps {
			want = append(want, s.status)
		}
		if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: statuses %v; want %v", proto.name, got, want)
		}
		tun := in.waitRecord(t, proto.name+" tunnel", func(r map[string]any) bool {
			tl, _ := r["tls"].(map[string]any)
			return r["kind"] == "connect" && r["host"] == "api.test" && tl["inspected"] == true && tl["alpn"] == map[string]string{"--http1.1": "http/1.1", "--http2": "h2"}[proto.flag]
		})
		if tun["requests"] != float64(len(steps)) {
			t.Fatalf("%s: tunnel requests %v; want %d (%v)", proto.name, tun["requests"], len(steps), tun)
		}
		oc, _ := tun["tls"].(map[string]any)["origin_cert"].(map[string]any)
		if !strings.Contains(fmt.Sprint(oc["issuer"]), "inspect e2e origin CA") || oc["not_after"] == nil {
			t.Fatalf("%s: origin_cert %v", proto.name, oc)
		}
		var got []map[string]any
		for _, r := range in.records(t) {
			if r["kind"] == "inspected" && r["tunnel"] == tun["id"] {
				got = append(got, r)
			}
		}
		if len(got) != len(steps) {
			t.Fatalf("%s: %d inspected records of tunnel %v; want %d:\n%s", proto.name, len(got), tun["id"], len(steps), in.audit.String())
		}
		// In request order: an exchange is recorded when egressd has relayed
		// its response, and curl may send the next request before that
		// (seen over HTTP/2: a 403 recorded before the 200 asked first).
		slices.SortStableFunc(got, func(a, b map[string]any) int { return recordStart(t, a).Compare(recordStart(t, b)) })
		for i, s := range steps {
			r := got[i]
			h, _ := r["http"].(map[string]any)
			rh, _ := h["redirect_host"].(string)
			if h["method"] != s.method || fmt.Sprint(h["status"]) != s.status || h["proto"] != proto.name ||
				r["reason"] != s.reason || rh != s.redirect {
				t.Errorf("%s %s %s: record %v", proto.name, s.method, s.path, r)
			}
			if _, ok := h["path"]; ok {
				t.Errorf("path recorded without --audit-http-path full: %v", r)
			}
		}
	}

	// Two tunnels to api.test, one per protocol: the first handshake
	// minted its leaf, the second took it from the cache. Both were counted
	// before curl's handshakes completed, so the scrape needs no wait.
	for result, want := range map[string]float64{"minted": 1, "hit": 1, "failed": 0} {
		if got := in.metric(t, `egressd_inspect_leaves_total{result="`+result+`"}`); got != want {
			t.Errorf("egressd_inspect_leaves_total{result=%q} = %v; want %v", result, got, want)
		}
	}

	// An origin whose certificate does not name the host: never presented.
	if code, _, _ := in.curlRaw(t, w.world, "127.0.0.2", "--proxy", "http://"+in.proxy, "--cacert", w.icaCert, "https://wrongname.test:"+w.port+"/"); code == 0 {
		t.Fatal("curl reached an origin that failed verification")
	}
	bad := in.waitRecord(t, "upstream-tls-failed", hostIs("connect", "wrongname.test", "allow"))
	if bad["outcome"] != "upstream-tls-failed" || !strings.Contains(fmt.Sprint(bad["error"]), "hostname-mismatch") {
		t.Fatalf("wrongname.test record %v", bad)
	}

	// A host no inspecting rule names: the origin's own certificate.
	code, body, stderr := in.curlRaw(t, w.world, "127.0.0.2", "--proxy", "http://"+in.proxy, "--cacert", w.originCA, "https://models.test:"+w.port+"/")
	if code != 0 || body != "models list" {
		t.Fatalf("blind tunnel with the origin's CA: curl %d %q %s", code, body, stderr)
	}
	blind := in.waitRecord(t, "blind models.test", hostIs("connect", "models.test", "allow"))
	if tl, _ := blind["tls"].(map[string]any); tl["inspected"] != nil || blind["requests"] != nil {
		t.Fatalf("models.test was inspected: %v", blind)
	}

	checkNoSecrets(t, in, w)
}

// recordStart is a record's start time.
func recordStart(t *testing.T, r map[string]any) time.Time {
	t.Helper()
	start, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["start"]))
	if err != nil {
		t.Fatalf("record start %v: %v", r["start"], err)
	}
	return start
}
