package main

// End-to-end: the real CLI in-process, a real upstream DNS server, a real TLS
// origin and curl as the client, all on 127.0.0.0/8. Clients bind to
// 127.0.0.2 (a selected pod), 127.0.0.3 (a pod no policy selects) and
// 127.0.0.9 (no pod) to play different identities.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/testutil"
)

// world is the outside world of a test: DNS names on 127.0.0.1 and a TLS
// origin that serves them.
type world struct {
	dnsAddr string
	port    string // the origin's port
	caFile  string
}

func startWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("models.test", "eu1.blob.test", "exfil.test", "api.test")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		switch {
		case host == "models.test" && r.URL.Path == "/weights.bin":
			http.Redirect(w, r, "https://eu1.blob.test:"+port+"/weights.bin?sig=TOPSECRET", http.StatusFound)
		case host == "models.test" && r.URL.Path == "/leak":
			http.Redirect(w, r, "https://exfil.test:"+port+"/upload", http.StatusFound)
		case host == "eu1.blob.test":
			_, _ = w.Write(bytes.Repeat([]byte("w"), 100000))
		default:
			_, _ = io.WriteString(w, "hello from "+host)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc("test.", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		name := q.Question[0].Name
		missing := strings.HasPrefix(name, "missing.")
		if q.Question[0].Qtype == dns.TypeA && !missing {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
		if missing {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	dsrv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = dsrv.ActivateAndServe() }()
	t.Cleanup(func() { _ = dsrv.Shutdown() })
	return &world{dnsAddr: pc.LocalAddr().String(), port: port, caFile: caFile}
}

const e2ePolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm-server}}
  serviceAccountNames: [llm-server]
  egress:
  - hosts: [models.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
    purpose: model weights
    owner: ml-platform
  - hosts: ["**.blob.test"]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
`

const e2ePods = `apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: llm-0, namespace: llm-prod, labels: {app: llm-server}}
  spec: {serviceAccountName: llm-server}
  status: {phase: Running, podIPs: [{ip: 127.0.0.2}]}
- kind: Pod
  metadata: {name: other-0, namespace: llm-prod, labels: {app: other}}
  spec: {serviceAccountName: llm-server}
  status: {phase: Running, podIPs: [{ip: 127.0.0.3}]}
`

// instance is a running `egressd run`.
type instance struct {
	proxy, dns, metrics string
	sni, http           string
	audit               *testutil.SyncBuffer
	logs                testutil.SyncBuffer // the operational log, one JSON object a line
	policyFile          string
	done                chan int
	stop                context.CancelFunc
}

func startEgressd(t *testing.T, w *world, extra ...string) *instance {
	t.Helper()
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	writeFile(t, policyFile, strings.ReplaceAll(e2ePolicy, "PORT", w.port))
	pods := filepath.Join(dir, "pods.yaml")
	writeFile(t, pods, e2ePods)
	in := startEgressdArgs(t, w, append([]string{"--policy", policyFile, "--pods", pods}, extra...)...)
	in.policyFile = policyFile
	return in
}

// startEgressdArgs runs `egressd run` with test listeners and the given
// policy and identity source flags.
func startEgressdArgs(t *testing.T, w *world, source ...string) *instance {
	t.Helper()
	in := &instance{audit: &testutil.SyncBuffer{}, done: make(chan int, 1)}
	args := append([]string{"run", "--upstream-dns", w.dnsAddr,
		"--proxy-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--reload-interval", "20ms", "--drain-timeout", "2s", "--lameduck", "0", "--log-level", "debug"}, source...)
	ctx, cancel := context.WithCancel(context.Background())
	in.stop = cancel
	pr, pw := io.Pipe()
	go func() {
		in.done <- dispatch(ctx, args, in.audit, pw)
		pw.Close()
	}()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "egressd serving" {
				in.proxy, _ = line["proxy"].(string)
				in.dns, _ = line["dns"].(string)
				in.sni, _ = line["sni"].(string)
				in.http, _ = line["http"].(string)
				in.metrics, _ = line["metrics"].(string)
				close(ready)
			}
			in.logs.Write(append(sc.Bytes(), '\n'))
			t.Log("egressd:", sc.Text())
		}
	}()
	select {
	case <-ready:
	case code := <-in.done:
		t.Fatalf("egressd exited with %d before serving", code)
	case <-time.After(20 * time.Second):
		t.Fatal("egressd did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			t.Error("egressd did not stop")
		}
	})
	return in
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// curl runs curl through the proxy from a client address and returns its
// exit code, stdout and stderr.
func (in *instance) curl(t *testing.T, w *world, from string, args ...string) (int, string, string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required (scripts/deps installs it)")
	}
	return in.curlRaw(t, w, from, append([]string{"--proxy", "http://" + in.proxy}, args...)...)
}

// curlRaw runs curl from a client address, trusting the world's CA.
func (in *instance) curlRaw(t *testing.T, w *world, from string, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{"-sS", "--max-time", "10", "--interface", from, "--cacert", w.caFile}, args...)
	cmd := exec.Command("curl", full...)
	cmd.Env = append(os.Environ(), "NO_PROXY=", "no_proxy=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// records parses the audit stream.
func (in *instance) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(in.audit.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line is not JSON: %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// waitRecord waits until a record matching f is written, and returns it.
func (in *instance) waitRecord(t *testing.T, what string, f func(map[string]any) bool) map[string]any {
	t.Helper()
	return in.waitRecordWithin(t, what, 10*time.Second, f)
}

// waitRecordWithin is waitRecord with its own deadline.
func (in *instance) waitRecordWithin(t *testing.T, what string, wait time.Duration, f func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		for _, r := range in.records(t) {
			if f(r) {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no audit record %s; have:\n%s", what, in.audit.String())
	return nil
}

func hostIs(kind, host, verdict string) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["kind"] == kind && r["host"] == host && r["verdict"] == verdict
	}
}

func TestEndToEndDownloadThroughRedirect(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	url := "https://models.test:" + w.port + "/weights.bin"

	code, body, stderr := in.curl(t, w, "127.0.0.2", "-fL", url)
	if code != 0 || len(body) != 100000 {
		t.Fatalf("allowed download: curl exit %d, %d bytes, %s", code, len(body), stderr)
	}
	models := in.waitRecord(t, "allowing models.test", hostIs("connect", "models.test", "allow"))
	blob := in.waitRecord(t, "allowing eu1.blob.test", hostIs("connect", "eu1.blob.test", "allow"))
	for _, r := range []map[string]any{models, blob} {
		if r["reason"] != "allowed" || r["policy"] != "llm-prod/llm" || r["peer"] != "127.0.0.1:"+w.port {
			t.Errorf("record %v", r)
		}
		client, _ := r["client"].(map[string]any)
		if client["pod"] != "llm-0" || client["namespace"] != "llm-prod" || client["serviceAccount"] != "llm-server" || client["ip"] != "127.0.0.2" {
			t.Errorf("client %v", client)
		}
		tlsInfo, _ := r["tls"].(map[string]any)
		if tlsInfo["result"] != "established" || tlsInfo["version"] != "TLS1.3" {
			t.Errorf("tls %v", tlsInfo)
		}
		d, _ := r["dns"].(map[string]any)
		if answers, _ := d["answers"].([]any); len(answers) != 1 || answers[0] != "127.0.0.1" {
			t.Errorf("dns %v", d)
		}
	}
	if models["purpose"] != "model weights" || models["owner"] != "ml-platform" {
		t.Errorf("purpose/owner missing: %v", models)
	}
	if n, _ := blob["bytes_received"].(float64); n < 100000 {
		t.Errorf("bytes_received %v", blob["bytes_received"])
	}

	// The redirect to a host no rule allows is refused at CONNECT.
	code, _, stderr = in.curl(t, w, "127.0.0.2", "-fL", "https://models.test:"+w.port+"/leak")
	if code == 0 {
		t.Fatal("redirect to exfil.test succeeded")
	}
	if !strings.Contains(stderr, "403") {
		t.Errorf("curl said %q, want the 403", stderr)
	}
	deny := in.waitRecord(t, "denying exfil.test", hostIs("connect", "exfil.test", "deny"))
	if deny["reason"] != "not-allowlisted" {
		t.Errorf("deny %v", deny)
	}
	if strings.Contains(in.audit.String(), "TOPSECRET") {
		t.Error("the signed URL's query string reached the audit log")
	}
}

func TestEndToEndIdentitiesAndGuard(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	url := "https://models.test:" + w.port + "/"
	cases := []struct {
		name, from, target, reason string
	}{
		{"pod no policy selects", "127.0.0.3", url, "not-allowlisted"},
		{"no pod at all", "127.0.0.9", url, "unknown-client"},
		{"port not allowed", "127.0.0.2", "https://models.test:1/", "port-not-allowed"},
		{"metadata address, never dialled", "127.0.0.2", "http://169.254.169.254/latest/meta-data/", "metadata"},
		{"metadata name", "127.0.0.2", "http://metadata.google.internal/computeMetadata/v1/", "metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// %{http_connect} is the CONNECT answer (https), %{http_code}
			// the proxy's answer to an absolute-form request (http).
			_, out, _ := in.curl(t, w, tc.from, "-o", "/dev/null", "-w", "%{http_connect} %{http_code}", tc.target)
			if !strings.Contains(out, "403") {
				t.Errorf("curl saw %q, want a 403 from the proxy", out)
			}
			in.waitRecord(t, "with reason "+tc.reason, func(r map[string]any) bool {
				c, _ := r["client"].(map[string]any)
				return r["reason"] == tc.reason && r["verdict"] == "deny" && c["ip"] == tc.from
			})
		})
	}
}

func TestEndToEndReload(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	api := "https://api.test:" + w.port + "/"
	if code, _, _ := in.curl(t, w, "127.0.0.2", "-f", api); code == 0 {
		t.Fatal("api.test allowed before the policy names it")
	}
	before := in.metric(t, `egressd_reloads_total{source="policy"}`)
	// A broken policy is rejected and the last good one stays in force.
	writeFile(t, in.policyFile, "apiVersion: egressd.dev/v1alpha1\nkind: EgressPolicy\nmetadata: {name: x}\nspec: {egress: [{hosts: ['*'], ports: [0]}]}\n")
	in.waitMetric(t, `egressd_reload_errors_total{source="policy"}`, 1)
	if code, body, stderr := in.curl(t, w, "127.0.0.2", "-f", "https://models.test:"+w.port+"/"); code != 0 || body != "hello from models.test" {
		t.Fatalf("last good policy not in force after a broken reload: %d %q %s", code, body, stderr)
	}
	// A good change takes effect without a restart.
	good := strings.ReplaceAll(e2ePolicy, "PORT", w.port) + "  - hosts: [api.test]\n    ports: [" + w.port + "]\n    cidrs: [127.0.0.0/8]\n"
	writeFile(t, in.policyFile, good)
	in.waitMetric(t, `egressd_reloads_total{source="policy"}`, before+1)
	if code, body, stderr := in.curl(t, w, "127.0.0.2", "-f", api); code != 0 || body != "hello from api.test" {
		t.Fatalf("api.test after reload: %d %q %s", code, body, stderr)
	}
}

func TestEndToEndDNS(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	cases := []struct {
		name, from, qname string
		rcode             int
	}{
		{"allowed name", "127.0.0.2", "models.test.", dns.RcodeSuccess},
		{"allowed by wildcard", "127.0.0.2", "eu1.blob.test.", dns.RcodeSuccess},
		{"not allowed", "127.0.0.2", "exfil.test.", dns.RcodeNameError},
		{"metadata name", "127.0.0.2", "metadata.google.internal.", dns.RcodeNameError},
		{"unknown client", "127.0.0.9", "models.test.", dns.RcodeRefused},
	}
	for _, tc := range cases {
		for _, netw := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+netw, func(t *testing.T) {
				c := &dns.Client{Net: netw, Timeout: 5 * time.Second}
				if netw == "udp" {
					c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(tc.from)}}
				} else {
					c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
				}
				q := new(dns.Msg)
				q.SetQuestion(tc.qname, dns.TypeA)
				r, _, err := c.Exchange(q, in.dns)
				if err != nil {
					t.Fatal(err)
				}
				if r.Rcode != tc.rcode {
					t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
			})
		}
	}
	in.waitRecord(t, "for the dns query", hostIs("dns", "models.test", "allow"))
}

func TestEndToEndMetricsHealthAndDrain(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + in.metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	if code, _, stderr := in.curl(t, w, "127.0.0.2", "-f", "https://models.test:"+w.port+"/"); code != 0 {
		t.Fatalf("curl: %s", stderr)
	}
	in.waitMetric(t, `egressd_requests_total{kind="connect",probe="false",reason="allowed",verdict="allow"}`, 1)
	in.waitMetric(t, `egressd_audit_records_total`, 1)
	if v := in.metric(t, `egressd_identities`); v != 2 {
		t.Errorf("egressd_identities = %v, want 2", v)
	}

	// An open tunnel at SIGTERM: egressd turns unready, drains, cuts it at
	// the deadline, and still writes its record.
	conn, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, tcpAddr(t, in.proxy))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT models.test:%s HTTP/1.1\r\nHost: models.test:%s\r\n\r\n", w.port, w.port)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	in.stop()
	select {
	case code := <-in.done:
		if code != 0 {
			t.Errorf("exit code %d", code)
		}
		in.done <- code
	case <-time.After(10 * time.Second):
		t.Fatal("egressd did not stop after the drain timeout")
	}
	in.waitRecord(t, "for the cut tunnel", func(r map[string]any) bool {
		return r["kind"] == "connect" && r["host"] == "models.test" && r["error"] != nil && r["error"] != ""
	})
}

func tcpAddr(t *testing.T, s string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// metric reads one sample from /metrics; 0 when absent.
func (in *instance) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, _ := testutil.Metric(t, in.metrics, name)
	return v
}

func (in *instance) waitMetric(t *testing.T, name string, atLeast float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if in.metric(t, name) >= atLeast {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %v (now %v)", name, atLeast, in.metric(t, name))
}
