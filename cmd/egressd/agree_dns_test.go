package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/dnsserver"
	"github.com/egressd/egressd/internal/dnstest"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// agreeClusterCIDR and agreeSearch are what both the server and explain
// are given: the cluster's range (--private-cidr) and a node search
// domain (run reads it from /etc/resolv.conf).
const (
	agreeClusterCIDR = "10.96.0.0/12"
	agreeSearch      = "corp.example"
)

// TestDNSServerAndExplainAgree: for every name, the reason (and
// would_deny) the real DNS server records for a pod's A query equals what
// `explain --kind dns --resolve` says, in enforce and audit mode. Both
// decide through admit (Identify, then Admit with AnyPort: metadata names,
// the cluster domain, the cluster's reverse names, the policy, search-list
// expansions) and admit.AllNever on the upstream's answer. Before, explain
// said not-allowlisted where the server answered cluster-domain or
// search-expansion (issue 24). In audit mode only a name enforce allows
// has search-list expansions: every name is allowed there, and the
// cluster's own "kubernetes.default.svc.cluster.local" was answered
// NXDOMAIN as an expansion of "kubernetes.default".
func TestDNSServerAndExplainAgree(t *testing.T) {
	upstream := dnstest.NewUpstream(t)
	upstream.Set("models.agree.test./A", "models.agree.test. 30 IN A 127.0.0.9")
	upstream.Set("ll.agree.test./A", "ll.agree.test. 30 IN A 169.254.1.1")
	upstream.Set("md.agree.test./A", "md.agree.test. 30 IN A 169.254.169.254")
	upstream.Set("mixed.agree.test./A", "mixed.agree.test. 30 IN A 169.254.1.1", "mixed.agree.test. 30 IN A 127.0.0.9")
	upstream.Set("cname-md.agree.test./A", "cname-md.agree.test. 30 IN CNAME metadata.google.internal.")
	cases := []struct {
		name string
		mode policy.Mode
		want string // the reason both give; "~" prefix: would_deny
	}{
		{"models.agree.test", policy.ModeEnforce, "allowed"},
		{"MODELS.agree.test.", policy.ModeEnforce, "allowed"},
		{"kubernetes.default.svc.cluster.local", policy.ModeEnforce, "cluster-domain"},
		{"kubernetes.default.svc.cluster.local", policy.ModeAudit, "cluster-domain"},
		{"1.0.96.10.in-addr.arpa", policy.ModeEnforce, "cluster-domain"},
		{"1.0.0.203.in-addr.arpa", policy.ModeEnforce, "not-allowlisted"},
		{"models.agree.test.shop.svc.cluster.local", policy.ModeEnforce, "search-expansion"},
		{"models.agree.test.shop.svc.cluster.local", policy.ModeAudit, "search-expansion"},
		{"other.example.shop.svc.cluster.local", policy.ModeAudit, "cluster-domain"},
		{"other.example." + agreeSearch, policy.ModeAudit, "~not-allowlisted"},
		{"models.agree.test.svc.cluster.local", policy.ModeEnforce, "search-expansion"},
		{"models.agree.test." + agreeSearch, policy.ModeEnforce, "search-expansion"},
		{"other.example.shop.svc.cluster.local", policy.ModeEnforce, "cluster-domain"},
		{"other.example." + agreeSearch, policy.ModeEnforce, "not-allowlisted"},
		{"other.example", policy.ModeEnforce, "not-allowlisted"},
		{"other.example", policy.ModeAudit, "~not-allowlisted"},
		{"metadata.google.internal", policy.ModeEnforce, "metadata"},
		{"metadata.google.internal", policy.ModeAudit, "metadata"},
		{"ll.agree.test", policy.ModeEnforce, "link-local"},
		{"ll.agree.test", policy.ModeAudit, "link-local"},
		{"md.agree.test", policy.ModeEnforce, "metadata"},
		{"mixed.agree.test", policy.ModeEnforce, "allowed"},
		{"cname-md.agree.test", policy.ModeEnforce, "metadata"},
		{"bad_name!.agree.test", policy.ModeEnforce, "invalid-host"},
	}
	dir := t.TempDir()
	polFile, podsFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	for f, s := range map[string]string{polFile: fmt.Sprintf(agreePolicy, 443), podsFile: agreePods} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	servers := map[policy.Mode]*agreeDNSServer{}
	for _, mode := range []policy.Mode{policy.ModeEnforce, policy.ModeAudit} {
		servers[mode] = startAgreeDNSServer(t, mode, polFile, podsFile, upstream.Addr)
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+string(tc.mode), func(t *testing.T) {
			served := servers[tc.mode].query(t, tc.name)
			explained := explainReason(t, "--policy", polFile, "--pods", podsFile, "--resolve",
				"--upstream-dns", upstream.Addr, "--pod", "shop/web-0", "--kind", "dns", "--host", tc.name,
				"--private-cidr", agreeClusterCIDR, "--search-domain", agreeSearch, "--mode", string(tc.mode))
			if served != explained || served != tc.want {
				t.Fatalf("the server records %q, explain says %q; want %q", served, explained, tc.want)
			}
		})
	}
}

// agreeDNSServer is a real DNS server, as run wires it for the test's
// mode, on a UDP socket of 127.0.0.1.
type agreeDNSServer struct {
	addr    string
	records recordSink
}

func startAgreeDNSServer(t *testing.T, mode policy.Mode, polFile, podsFile, upstream string) *agreeDNSServer {
	t.Helper()
	snap, store := loadRunInputs(t, polFile, podsFile)
	m := metrics.New()
	res, err := resolver.New(resolver.Config{Upstreams: []string{upstream}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	s := &agreeDNSServer{records: make(recordSink, 16)}
	srv, err := dnsserver.New(dnsserver.Config{
		Inputs: admit.Inputs{Policy: func() *policy.Snapshot { return snap }, Identity: store, Mode: mode},
		Names: admit.Names{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix(agreeClusterCIDR)},
			SearchDomains: []string{agreeSearch}},
		Resolver: res,
		Audit:    audit.New(audit.Config{Writers: []io.Writer{s.records}, Metrics: m}),
		Metrics:  m,
	})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeUDP(pc) }()
	stopOnCleanup(t, srv.Shutdown)
	s.addr = pc.LocalAddr().String()
	return s
}

// query asks for name's A record from the pod's address and returns the
// reason its record carries ("~" prefix: would_deny).
func (s *agreeDNSServer) query(t *testing.T, name string) string {
	t.Helper()
	c := dns.Client{Net: "udp", Timeout: 10 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}}}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	if _, _, err := c.Exchange(m, s.addr); err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	select {
	case l := <-s.records:
		var rec record.Record
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatalf("record %s: %v", l, err)
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
