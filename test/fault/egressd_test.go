package fault

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/egressd/egressd/internal/testutil"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// instance is a running egressd process.
type instance struct {
	cmd       *exec.Cmd
	proxy     string
	dns       string
	metrics   string
	auditFile string
	policy    string // the policy file egressd polls
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
	in := &instance{auditFile: filepath.Join(dir, "audit.jsonl"), policy: filepath.Join(dir, "policy.yaml"), exited: make(chan error, 1), log: &bytes.Buffer{}, logMu: &sync.Mutex{}}
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
	// WouldDeny: allowed in audit mode, denied in enforce.
	WouldDeny bool   `json:"would_deny"`
	Reason    string `json:"reason"`
	Outcome   string `json:"outcome"`
	Error     string `json:"error"`
	Client    struct {
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
	code, err := in.tryGet(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return code
}

// tryGet is get without t: an absolute-form GET through the proxy from the
// pod, its status or the error.
func (in *instance) tryGet(url string) (int, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
	c, err := d.Dial("tcp", in.proxy)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	host := strings.SplitN(strings.TrimPrefix(url, "http://"), "/", 2)[0]
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", url, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// gauge reads one gauge from /metrics.
func (in *instance) gauge(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := testutil.Metric(t, in.metrics, name)
	if !ok {
		t.Fatalf("%s not in /metrics", name)
	}
	return v
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
