package webhook_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/inject"
)

// netns is a network namespace the test creates: only lo, whose addresses
// (127.0.0.0/8) it owns, and no route out. `ip netns exec` bind-mounts
// /etc/netns/NAME/{resolv.conf,hosts} over /etc for what runs in it, which
// is how the admitted pod's dnsConfig reaches a real glibc resolver.
type netns struct {
	name, etc string
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip (iproute2) not found: scripts/deps installs it")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := &netns{name: "egressd-inject-" + hex.EncodeToString(b)}
	n.etc = filepath.Join("/etc/netns", n.name)
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", n.name).Run()
		_ = os.RemoveAll(n.etc)
	})
	if out, err := exec.Command("ip", "-n", n.name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	if err := os.MkdirAll(n.etc, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

// cmd runs name in the namespace with exactly env (plus PATH).
func (n *netns) cmd(env []string, name string, args ...string) *exec.Cmd {
	c := exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...)
	c.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return c
}

// binaries holds the programs the tests run, built once per test binary.
var binaries sync.Map // package path → *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// build compiles pkg (once) and returns the program's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := binaries.LoadOrStore(pkg, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "egressd-webhook-test-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		c := exec.Command("go", "build", "-o", b.path, pkg)
		c.Dir = repoRoot(t)
		if out, err := c.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// startIn starts c, named name in the log, and stops it in t.Cleanup. It
// returns the first line of its stderr that holds ready (empty: it waits
// for nothing).
func startIn(t *testing.T, name string, c *exec.Cmd, ready string) string {
	t.Helper()
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			t.Log(name, sc.Text())
			if !found && ready != "" && strings.Contains(sc.Text(), ready) {
				found = true
				seen <- sc.Text()
			}
		}
	}()
	if ready == "" {
		return ""
	}
	select {
	case line := <-seen:
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no %q within 30s", name, ready)
		return ""
	}
}

// resolvConf renders a pod's dnsConfig the way the kubelet does for
// dnsPolicy None.
func resolvConf(dc *corev1.PodDNSConfig) string {
	var b strings.Builder
	for _, ns := range dc.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	fmt.Fprintf(&b, "search %s\n", strings.Join(dc.Searches, " "))
	var opts []string
	for _, o := range dc.Options {
		if o.Value != nil {
			opts = append(opts, o.Name+":"+*o.Value)
		} else {
			opts = append(opts, o.Name)
		}
	}
	fmt.Fprintf(&b, "options %s\n", strings.Join(opts, " "))
	return b.String()
}

// TestEndToEnd: a pod admitted by the API server through egressd's
// webhook, its env given to a real curl and its dnsConfig to glibc, inside
// a network namespace where egressd (the built binary, --pods) and the
// demo's outside world (examples/demo/origin) run: the allowed host is
// reached by name and by proxy, the other is refused by both.
func TestEndToEnd(t *testing.T) {
	n := newNetns(t)
	h := start(t, func(c *inject.Config) {
		c.DNS = netip.MustParseAddr("127.0.0.1") // egressd's resolver, :53 in the namespace
		c.APIServer = []netip.Addr{netip.MustParseAddr("10.96.0.1")}
		c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	})
	p, err := h.create(t, h.ns, pod("llm-server", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "curl"}}
	}), false)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = h.env.Client.CoreV1().Pods(h.ns).Get(context.Background(), p.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Spec.DNSPolicy != corev1.DNSNone || p.Spec.DNSConfig == nil {
		t.Fatalf("admitted pod's DNS: %s %+v", p.Spec.DNSPolicy, p.Spec.DNSConfig)
	}
	var env []string
	for _, e := range p.Spec.InitContainers[0].Env {
		env = append(env, e.Name+"="+e.Value)
	}
	t.Logf("admitted init container env %q, dnsConfig %s", env, mustJSON(p.Spec.DNSConfig))
	if len(env) != 6 {
		t.Fatalf("init container env %q: want the six proxy variables", env)
	}

	// The pod's view of the world: its resolv.conf from dnsConfig, and
	// egressd's Service name, which the cluster DNS would answer, in hosts.
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(n.etc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("resolv.conf", resolvConf(p.Spec.DNSConfig))
	write("hosts", "127.0.0.1 localhost\n127.0.0.1 egressd."+h.ns+".svc\n")

	dir := t.TempDir()
	egressd := build(t, "./cmd/egressd")
	origin := build(t, "./examples/demo/origin")
	root := repoRoot(t)
	startIn(t, "origin", n.cmd(nil, origin, "-dir", dir, "-dns", "127.0.0.1:15353", "-https", "127.0.0.1:23443"), "")
	startIn(t, "egressd", n.cmd(nil, egressd, "run", "--policy", filepath.Join(root, "examples/demo/policy.yaml"),
		"--pods", filepath.Join(root, "examples/demo/pods.yaml"), "--upstream-dns", "127.0.0.1:15353",
		"--proxy-addr", "127.0.0.1:3128", "--dns-addr", "127.0.0.1:53", "--metrics-addr", "127.0.0.1:9090"), "egressd serving")
	caFile := filepath.Join(dir, "ca.pem")
	deadline := time.Now().Add(10 * time.Second)
	for { // the origin writes its CA once it listens
		if _, err := os.Stat(caFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo origin wrote no ca.pem")
		}
		time.Sleep(20 * time.Millisecond) // a file appearing has no event to wait on here
	}

	t.Run("glibc resolves the allowed name through egressd", func(t *testing.T) {
		// hosts, not ahosts: getaddrinfo's AI_ADDRCONFIG finds no address
		// but loopback in the namespace and would return nothing.
		out, err := n.cmd(nil, "getent", "hosts", "models.demo.test").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "127.0.0.1 ") {
			t.Fatalf("getent: %v: %s", err, out)
		}
	})
	t.Run("glibc gets no answer for a name no rule allows", func(t *testing.T) {
		out, err := n.cmd(nil, "getent", "hosts", "exfil.demo.test").CombinedOutput()
		if err == nil {
			t.Fatalf("getent resolved exfil.demo.test: %s", out)
		}
	})
	t.Run("curl with the pod's env downloads from the allowed host", func(t *testing.T) {
		out, err := n.cmd(env, "curl", "-sS", "-L", "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_code} %{http_connect}",
			"https://models.demo.test:23443/weights.bin").Output()
		if err != nil || string(out) != "200 200" {
			t.Fatalf("curl: %v: %s (want 200 through CONNECT 200)", err, out)
		}
	})
	t.Run("curl with the pod's env is refused another host", func(t *testing.T) {
		out, err := n.cmd(env, "curl", "-sS", "--cacert", caFile, "-o", "/dev/null", "-w", "%{http_connect}",
			"https://exfil.demo.test:23443/upload").Output()
		if err == nil || !strings.HasPrefix(string(out), "403") {
			t.Fatalf("curl: %v: %s (want CONNECT 403)", err, out)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
