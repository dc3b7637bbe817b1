package chart_test

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/testutil"
)

// probeRunValues: a release that inspects api.test (its port: PORT) and
// allows GET /v1/models and POST /v1/chat/completions there; the helm
// test's checks ask for both and for a denied path and method. ICA is the
// inspection CA's certificate, indented for caCert.
const probeRunValues = `mode: enforce
inspection:
  caSecret: egressd-inspection-ca
  caCert: |
ICA
policies:
  - name: llm
    spec:
      podSelector:
        matchLabels: {app.kubernetes.io/name: llm-server}
      egress:
        - hosts: [api.test]
          ports: [PORT]
          cidrs: [127.0.0.0/8]
          inspect: true
          http:
            - methods: [GET]
              paths: [/v1/models]
            - methods: [POST]
              paths: [/v1/chat/completions]
tests:
  podLabels: {app.kubernetes.io/name: llm-server}
  dns: false
  checks:
    - {name: models, host: api.test, port: PORT, path: /v1/models, expect: allow}
    - {name: chat, host: api.test, port: PORT, path: /v1/chat/completions, method: POST, expect: allow}
    - {name: files, host: api.test, port: PORT, path: /v1/files, expect: deny, reason: path-not-allowed}
    - {name: delete-models, host: api.test, port: PORT, path: /v1/models, method: DELETE, expect: deny, reason: method-not-allowed}
`

// TestProbeHookRunsInspectedPaths runs what `helm test` would run, for
// real, on this machine: the rendered probe Pod's command, its files taken
// from the ConfigMaps its volumes name (the probe file and the inspection
// CA's bundle) at its mount paths under a temporary root, against a local
// `egressd run` of the release's rendered EgressPolicy with the inspection
// CA, in front of an origin for api.test. The path checks pass (allowed
// and denied inside the tunnel, each decided by egressd and recorded) and
// the origin sees only the allowed requests. No kubelet: the Pod's spec
// is read, not scheduled.
func TestProbeHookRunsInspectedPaths(t *testing.T) {
	const ns = "llm-prod"
	ica, err := certs.NewCA("chart probe inspection CA")
	if err != nil {
		t.Fatal(err)
	}
	o := startPathOrigin(t)
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	icaPEM := "    " + strings.ReplaceAll(strings.TrimSpace(string(ica.CertPEM())), "\n", "\n    ")
	writeTestFile(t, values, strings.NewReplacer("PORT", o.port, "ICA", icaPEM).Replace(probeRunValues))
	objs := render(t, ns, []string{values})

	// egressd: the rendered policies, a pod file of the probe Pod's labels
	// at 127.0.0.1 (the probe's source here), the inspection CA's key as
	// the Secret would hold it.
	pod := fromUnstructured[corev1.Pod](t, find(t, objs, "Pod", "egressd-probe"))
	var policies []string
	for _, p := range ofKind(objs, "EgressPolicy") {
		b, err := yaml.Marshal(p.Object)
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, string(b))
	}
	if len(policies) != 1 {
		t.Fatalf("%d EgressPolicy objects rendered; want 1", len(policies))
	}
	labels, err := json.Marshal(pod.Labels)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"policy.yaml": strings.Join(policies, "---\n"),
		"pods.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: llm-0, namespace: " + ns + ", labels: " + string(labels) +
			"}\nstatus: {phase: Running, podIPs: [{ip: 127.0.0.1}]}\n",
		"ica.pem": string(ica.CertPEM()), "ica.key": string(ica.KeyPEM()), "origin.pem": string(o.ca.CertPEM()),
	}
	for name, data := range files {
		writeTestFile(t, filepath.Join(dir, name), data)
	}
	bin := buildEgressd(t)
	proxy, audit := startEgressdBin(t, bin, "run", "--policy", filepath.Join(dir, "policy.yaml"), "--pods", filepath.Join(dir, "pods.yaml"),
		"--inspect-ca-cert", filepath.Join(dir, "ica.pem"), "--inspect-ca-key", filepath.Join(dir, "ica.key"),
		"--upstream-ca", filepath.Join(dir, "origin.pem"), "--upstream-dns", o.dns,
		"--proxy-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--audit-file", filepath.Join(dir, "audit.jsonl"), "--lameduck", "0", "--drain-timeout", "2s")

	// The probe Pod's command: its ConfigMap volumes at their mount paths
	// under root, its --proxy at the local egressd.
	root := filepath.Join(dir, "pod")
	ctr := pod.Spec.Containers[0]
	for _, m := range ctr.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Spec.Volumes[i].ConfigMap == nil {
			continue
		}
		cm := fromUnstructured[corev1.ConfigMap](t, find(t, objs, "ConfigMap", pod.Spec.Volumes[i].ConfigMap.Name))
		for k, v := range cm.Data {
			p := filepath.Join(root, m.MountPath, k)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, p, v)
		}
	}
	args := slices.Clone(ctr.Args)
	for i, a := range args {
		switch {
		case i > 0 && args[i-1] == "--proxy":
			args[i] = "http://" + proxy
		case strings.HasPrefix(a, "/etc/"):
			args[i] = filepath.Join(root, a)
		}
	}
	if !slices.Contains(args, "--inspect-ca") {
		t.Fatalf("the probe Pod passes no --inspect-ca: %v", ctr.Args)
	}
	cmd := exec.Command(bin, append(args, "--source", "127.0.0.1")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("egressd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, want := range []string{"allowed (200)", "POST api.test:" + o.port + "/v1/chat/completions",
		"denied path-not-allowed (403)", "denied method-not-allowed (403)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the probe's table lacks %q:\n%s", want, out)
		}
	}
	if got := o.served.Load(); got != 2 {
		t.Errorf("the origin served %d requests; want 2 (the allowed ones)", got)
	}
	// egressd decided each inside the tunnel: an inspected record each,
	// of the tunnel whose record names the check (field probe).
	var reasons []string
	for deadline := time.Now().Add(10 * time.Second); len(reasons) < 4 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		reasons = reasons[:0]
		probeOf, reasonOf := map[string]string{}, map[string]string{}
		for _, line := range strings.Split(audit(), "\n") {
			var r struct{ ID, Kind, Tunnel, Reason, Probe string }
			switch {
			case json.Unmarshal([]byte(line), &r) != nil:
			case r.Kind == "connect" && r.Probe != "":
				probeOf[r.ID] = r.Probe
			case r.Kind == "inspected":
				reasonOf[r.Tunnel] = r.Reason
			}
		}
		for tun, reason := range reasonOf {
			reasons = append(reasons, probeOf[tun]+" "+reason)
		}
	}
	slices.Sort(reasons)
	if want := []string{"chat allowed", "delete-models method-not-allowed", "files path-not-allowed", "models allowed"}; !slices.Equal(reasons, want) {
		t.Errorf("inspected records (probe reason) %q; want %q\n%s", reasons, want, audit())
	}
}

// pathOrigin is a TLS origin for api.test on 127.0.0.1 and a DNS server
// that resolves api.test to it.
type pathOrigin struct {
	ca     *certs.CA
	port   string
	dns    string
	served atomic.Int64
}

func startPathOrigin(t *testing.T) *pathOrigin {
	t.Helper()
	ca, err := certs.NewCA("chart probe origin CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("api.test")
	if err != nil {
		t.Fatal(err)
	}
	o := &pathOrigin{ca: ca}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		o.served.Add(1)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	up := dnstest.NewUpstream(t)
	up.Set("api.test./A", "api.test. 60 IN A 127.0.0.1")
	o.dns = up.Addr
	return o
}

// startEgressdBin starts bin with args and returns the proxy address of
// its "egressd serving" log line and a reader of its audit file (the
// --audit-file flag's value). SIGTERM on cleanup.
func startEgressdBin(t *testing.T, bin string, args ...string) (proxy string, audit func() string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Proxy string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "egressd serving" {
				ready <- line.Proxy
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("egressd did not exit on SIGINT")
		}
		if t.Failed() {
			t.Log("egressd log:\n" + logs.String())
		}
	})
	select {
	case proxy = <-ready:
	case err := <-exited:
		t.Fatalf("egressd exited before serving: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatal("egressd did not start")
	}
	auditFile := args[slices.Index(args, "--audit-file")+1]
	return proxy, func() string {
		b, _ := os.ReadFile(auditFile)
		return string(b)
	}
}

// buildEgressd builds the egressd command into a temporary directory.
func buildEgressd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "egressd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/egressd")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(fmt.Errorf("write %s: %w", path, err))
	}
}
