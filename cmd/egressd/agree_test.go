package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/explain"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// agreePolicy allows *.agree.test on the test's port, with the rule's cidrs
// opening 127.0.0.0/24: 127.0.0.x stands for a permitted address (nothing
// listens on the port asked, so a dial is refused at once), 127.0.1.x for a
// private one outside the rule's cidrs. No address outside loopback is
// ever permitted, in either mode: the never class is refused in audit mode
// too, and a softened private address is a 127.0.1.x one.
const agreePolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: agree, namespace: shop}
spec:
  podSelector: {}
  egress:
    - hosts: ["*.agree.test"]
      ports: [%d]
      cidrs: ["127.0.0.0/24"]
`

const agreePods = `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: web-0, namespace: shop}
    spec: {serviceAccountName: web}
    status:
      phase: Running
      podIPs: [{ip: 127.0.0.2}]
`

// agreeLookuper is run's stub resolver: the answers are data.
type agreeLookuper map[string][]netip.Addr

func (l agreeLookuper) LookupIP(_ context.Context, host string) (resolver.Answer, error) {
	addrs, ok := l[host]
	if !ok {
		return resolver.Answer{}, resolver.ErrNXDomain
	}
	return resolver.Answer{Addrs: addrs, TTL: 30}, nil
}

// recordSink hands each audit record written to the test.
type recordSink chan []byte

func (s recordSink) Write(p []byte) (int, error) {
	s <- append([]byte(nil), p...)
	return len(p), nil
}

// TestRunAndExplainAgree: for every answer set, the reason (and
// would_deny) that `run` records for a CONNECT equals what `explain
// --resolve` says, in enforce and audit mode. run is a real proxy with a
// stub Lookuper; explain resolves the same answers from a real DNS server.
// Both go through the admission pipeline (package admit) and
// policy.Guard.CheckAll; before it, run kept the last never-class refusal
// and explain the first (metadata + link-local: link-local against
// metadata).
func TestRunAndExplainAgree(t *testing.T) {
	ip := netip.MustParseAddr
	answers := map[string][]netip.Addr{
		"metadata-link-local.agree.test": {ip("169.254.169.254"), ip("169.254.1.1")},
		"link-local-metadata.agree.test": {ip("169.254.1.1"), ip("169.254.169.254")},
		"link-local-public.agree.test":   {ip("169.254.1.1"), ip("127.0.0.9")},
		"private-outside.agree.test":     {ip("127.0.1.5")},
		"private-inside.agree.test":      {ip("127.0.0.9")},
		"outside-then-inside.agree.test": {ip("127.0.1.5"), ip("127.0.0.9")},
		"metadata-private.agree.test":    {ip("169.254.169.254"), ip("127.0.1.5")},
		"private-metadata.agree.test":    {ip("127.0.1.5"), ip("169.254.169.254")},
		"mapped-metadata.agree.test":     {ip("::ffff:169.254.169.254")},
		"mapped-inside.agree.test":       {ip("::ffff:127.0.0.9")},
		"mapped-outside-ll.agree.test":   {ip("::ffff:127.0.1.5"), ip("169.254.1.1")},
		"reserved-link-local.agree.test": {ip("0.0.0.0"), ip("169.254.1.1")},
	}
	cases := []struct {
		name string
		mode policy.Mode
		want string // the reason both give; "~" prefix: would_deny
	}{
		{"metadata-link-local", policy.ModeEnforce, "metadata"},
		{"metadata-link-local", policy.ModeAudit, "metadata"},
		{"link-local-metadata", policy.ModeEnforce, "link-local"},
		{"link-local-public", policy.ModeEnforce, "allowed"},
		{"link-local-public", policy.ModeAudit, "allowed"},
		{"private-outside", policy.ModeEnforce, "private-address"},
		{"private-outside", policy.ModeAudit, "~private-address"},
		{"private-inside", policy.ModeEnforce, "allowed"},
		{"outside-then-inside", policy.ModeEnforce, "allowed"},
		{"outside-then-inside", policy.ModeAudit, "~private-address"},
		{"metadata-private", policy.ModeEnforce, "metadata"},
		{"metadata-private", policy.ModeAudit, "~private-address"},
		{"private-metadata", policy.ModeEnforce, "metadata"},
		{"mapped-metadata", policy.ModeEnforce, "metadata"},
		{"mapped-metadata", policy.ModeAudit, "metadata"},
		{"mapped-inside", policy.ModeEnforce, "allowed"},
		{"mapped-outside-ll", policy.ModeEnforce, "link-local"},
		{"mapped-outside-ll", policy.ModeAudit, "~private-address"},
		{"reserved-link-local", policy.ModeEnforce, "reserved-address"},
	}
	port := testutil.ClosedPort(t)
	dir := t.TempDir()
	polFile, podsFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	for f, s := range map[string]string{polFile: fmt.Sprintf(agreePolicy, port), podsFile: agreePods} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	upstream := agreeDNS(t, answers)
	runs := map[policy.Mode]*agreeRun{}
	for _, mode := range []policy.Mode{policy.ModeEnforce, policy.ModeAudit} {
		runs[mode] = startAgreeRun(t, mode, polFile, podsFile, answers)
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+string(tc.mode), func(t *testing.T) {
			host := tc.name + ".agree.test"
			run := runs[tc.mode].connect(t, host, port)
			explained := explainReason(t, "--policy", polFile, "--pods", podsFile, "--resolve",
				"--upstream-dns", upstream, "--pod", "shop/web-0", "--host", host, "--port", fmt.Sprint(port),
				"--mode", string(tc.mode))
			if run != explained || run != tc.want {
				t.Fatalf("run records %q, explain says %q; want %q", run, explained, tc.want)
			}
		})
	}
}

// explainReason runs explain -o json with args and returns the reason it
// gives ("~" prefix: would_deny).
func explainReason(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runExplain(t, append(args, "-o", "json")...)
	if code == 2 {
		t.Fatalf("explain: %s", errOut)
	}
	var r struct{ Decision explain.Decision }
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("explain output %s: %v", out, err)
	}
	if r.Decision.WouldDeny {
		return "~" + string(r.Decision.Reason)
	}
	return string(r.Decision.Reason)
}

// loadRunInputs reads the policies and pods as run does.
func loadRunInputs(t *testing.T, polFile, podsFile string) (*policy.Snapshot, *identity.Store) {
	t.Helper()
	files, err := watch.Read([]string{polFile})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := loadPolicies(files, policy.ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := readPods([]string{podsFile})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	store.Replace(pods)
	return snap, store
}

// stopOnCleanup shuts a server down at the end of the test.
func stopOnCleanup(t *testing.T, shutdown func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
	})
}

// agreeRun is a real proxy instance, as run wires it for the test's mode.
type agreeRun struct {
	addr    string
	records recordSink
}

func startAgreeRun(t *testing.T, mode policy.Mode, polFile, podsFile string, answers agreeLookuper) *agreeRun {
	t.Helper()
	snap, store := loadRunInputs(t, polFile, podsFile)
	m := metrics.New()
	r := &agreeRun{records: make(recordSink, 16)}
	p, err := proxy.New(proxy.Config{
		Inputs:   admit.Inputs{Policy: func() *policy.Snapshot { return snap }, Identity: store, Mode: mode},
		Resolver: answers,
		Guard:    policy.NewGuard(policy.GuardConfig{}),
		Audit:    audit.New(audit.Config{Writers: []io.Writer{r.records}, Metrics: m}),
		Metrics:  m,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.ServeProxy(ln) }()
	stopOnCleanup(t, p.Shutdown)
	r.addr = ln.Addr().String()
	return r
}

// connect sends one CONNECT from the pod's address and returns the reason
// its record carries ("~" prefix: would_deny).
func (r *agreeRun) connect(t *testing.T, host string, port int) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := net.JoinHostPort(host, fmt.Sprint(port))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("CONNECT %s: 200, but nothing listens there", target)
	}
	select {
	case l := <-r.records:
		var rec record.Record
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatalf("record %s: %v", l, err)
		}
		if rec.Host != host {
			t.Fatalf("record of %q, want %q", rec.Host, host)
		}
		if rec.WouldDeny {
			return "~" + rec.Reason
		}
		return rec.Reason
	case <-time.After(15 * time.Second): // turns a hang into a failure
		t.Fatal("no audit record")
		return ""
	}
}

// agreeDNS serves the answer sets from a real DNS server on loopback for
// explain (IPv4-mapped addresses as AAAA records).
func agreeDNS(t *testing.T, answers map[string][]netip.Addr) string {
	t.Helper()
	u := dnstest.NewUpstream(t)
	for name, addrs := range answers {
		var a, aaaa []string
		for _, ip := range addrs {
			if ip.Is4() {
				a = append(a, name+". 30 IN A "+ip.String())
			} else {
				aaaa = append(aaaa, name+". 30 IN AAAA "+ip.String())
			}
		}
		u.Set(name+"./A", a...)
		u.Set(name+"./AAAA", aaaa...)
	}
	return u.Addr
}
