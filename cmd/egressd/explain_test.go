package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/explain")

const (
	explainPolicies = "testdata/explain/policies.yaml"
	explainPods     = "testdata/explain/pods.yaml"
)

// explainCase is one request of the golden tests.
type explainCase struct {
	name   string
	args   []string // after the fixture flags
	reason policy.Reason
	code   int
}

// explainCases cover allow, every deny reason of Decide and run's
// admission, and selection mismatches.
var explainCases = []explainCase{
	{"allow", []string{"--pod", "shop/web-0", "--host", "api.example.com", "--port", "443"}, policy.ReasonAllowed, 0},
	{"allow-by-ip", []string{"--ip", "10.244.0.10", "--host", "API.example.com.", "--port", "443"}, policy.ReasonAllowed, 0},
	{"not-allowlisted", []string{"--pod", "shop/web-0", "--host", "evil.example.org", "--port", "443"}, policy.ReasonNotAllowlisted, 1},
	{"port-not-allowed", []string{"--pod", "shop/web-0", "--host", "api.example.com", "--port", "80"}, policy.ReasonPortNotAllowed, 1},
	{"init-only", []string{"--pod", "shop/web-1", "--host", "weights.example.com", "--port", "443"}, policy.ReasonInitOnly, 1},
	{"init-rule-before-initialized", []string{"--pod", "shop/web-0", "--host", "weights.example.com", "--port", "443"}, policy.ReasonAllowed, 0},
	{"unknown-client-no-pod", []string{"--ip", "10.244.0.99", "--host", "api.example.com", "--port", "443"}, policy.ReasonUnknownClient, 1},
	{"unknown-client-succeeded", []string{"--pod", "shop/done-0", "--host", "api.example.com", "--port", "443"}, policy.ReasonUnknownClient, 1},
	{"metadata-name", []string{"--pod", "shop/web-0", "--host", "metadata.google.internal", "--port", "80"}, policy.ReasonMetadata, 1},
	{"metadata-hex", []string{"--pod", "shop/web-0", "--host", "0xa9fea9fe", "--port", "80", "--mode", "audit"}, policy.ReasonMetadata, 1},
	{"ip-literal", []string{"--pod", "shop/web-0", "--host", "10.40.7.9", "--port", "443"}, policy.ReasonIPLiteral, 1},
	{"address-rule", []string{"--pod", "shop/web-0", "--host", "10.60.1.2", "--port", "5432"}, policy.ReasonAllowed, 0},
	{"invalid-host", []string{"--pod", "shop/web-0", "--host", "bad..example.com", "--port", "443"}, policy.ReasonInvalidHost, 1},
	{"selection-labels", []string{"--pod", "shop/other-0", "--host", "api.example.com", "--port", "443"}, policy.ReasonPortNotAllowed, 1},
	{"selection-service-account", []string{"--pod", "shop/batch-0", "--host", "reports.example.org", "--port", "443"}, policy.ReasonNotAllowlisted, 1},
	{"audit-instance", []string{"--pod", "shop/other-0", "--host", "evil.example.org", "--port", "443", "--mode", "audit"}, policy.ReasonNotAllowlisted, 0},
	{"dns", []string{"--kind", "dns", "--pod", "shop/web-0", "--host", "a.b.cdn.example.net"}, policy.ReasonAllowed, 0},
}

// decideDirect decides a case the way run does, with the packages run
// uses and no code of explain: the identity store, NormalizeHost, Decide.
func decideDirect(t *testing.T, args []string) policy.Decision {
	t.Helper()
	get := func(name string) string {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--"+name {
				return args[i+1]
			}
		}
		return ""
	}
	files, err := watch.Read([]string{explainPolicies})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := loadPolicies(files, policy.ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := readPods([]string{explainPods})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	store.Replace(pods)
	var c *policy.Client
	if ip := get("ip"); ip != "" {
		c, _ = store.Lookup(netip.MustParseAddr(ip))
	} else {
		ns, name, _ := strings.Cut(get("pod"), "/")
		for _, p := range pods {
			if p.Namespace == ns && p.Name == name {
				for _, ip := range p.Status.PodIPs {
					if got, ok := store.Lookup(netip.MustParseAddr(ip.IP)); ok && got.Pod == name {
						c = got
					}
				}
			}
		}
	}
	if c == nil {
		return policy.Denied(policy.ReasonUnknownClient)
	}
	host, err := policy.NormalizeHost(get("host"))
	if err != nil {
		return policy.Denied(policy.ReasonInvalidHost)
	}
	port := 0
	if get("kind") != "dns" {
		port = atoi(t, get("port"))
	}
	d := snap.Decide(policy.DecideArgs{Client: c, Host: host, Port: port, Mode: policy.Mode(get("mode"))})
	if a, err := netip.ParseAddr(host); err == nil && get("kind") != "dns" {
		d, _ = policy.NewGuard(policy.GuardConfig{}).CheckAll(d, []netip.Addr{a}, uint16(port))
	}
	return d
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("port %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func runExplain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"explain"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "explain", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Explain -update)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestExplainGolden: the text of every case is its golden file, and the
// verdict and reason are those run's own steps give for the same inputs.
func TestExplainGolden(t *testing.T) {
	for _, tc := range explainCases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--policy", explainPolicies, "--pods", explainPods}, tc.args...)
			code, out, errOut := runExplain(t, args...)
			if code != tc.code || errOut != "" {
				t.Fatalf("exit %d, want %d; stderr %s\n%s", code, tc.code, errOut, out)
			}
			d := decideDirect(t, tc.args)
			if d.Reason != tc.reason || (code == 0) != d.Allowed() {
				t.Fatalf("run's steps decide %+v; the case wants %s, exit %d", d, tc.reason, tc.code)
			}
			if !strings.Contains(out, "reason "+string(d.Reason)) {
				t.Fatalf("output lacks reason %s:\n%s", d.Reason, out)
			}
			checkGolden(t, tc.name+".txt", out)

			// JSON carries the same decision.
			code, js, _ := runExplain(t, append(args, "-o", "json")...)
			var r struct {
				Decision struct {
					Verdict   string `json:"verdict"`
					WouldDeny bool   `json:"would_deny"`
					Reason    string `json:"reason"`
					Policy    string `json:"policy"`
					Rule      *int   `json:"rule"`
				} `json:"decision"`
			}
			if err := json.Unmarshal([]byte(js), &r); err != nil || code != tc.code {
				t.Fatalf("json exit %d: %v\n%s", code, err, js)
			}
			rule := -1
			if r.Decision.Rule != nil {
				rule = *r.Decision.Rule
			}
			if r.Decision.Verdict != string(d.Verdict) || r.Decision.Reason != string(d.Reason) ||
				r.Decision.WouldDeny != d.WouldDeny || r.Decision.Policy != d.Policy || rule != d.Rule {
				t.Fatalf("json decision %+v, Decide %+v", r.Decision, d)
			}
		})
	}
}

func TestExplainJSONGolden(t *testing.T) {
	code, out, _ := runExplain(t, "--policy", explainPolicies, "--pods", explainPods,
		"--pod", "shop/batch-0", "--host", "reports.example.org", "--port", "443", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	checkGolden(t, "selection-service-account.json", out)
}

// TestExplainResolve: --resolve asks a real DNS server (in-process, on
// 127.0.0.1) and puts every answer through the guard; nothing is dialled.
func TestExplainResolve(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := q.Question[0].Name
		if q.Question[0].Qtype == dns.TypeA {
			switch name {
			case "api.example.com.":
				m.Answer = append(m.Answer, a(name, "93.184.216.34"), a(name, "10.1.2.3"))
			case "registry.corp.internal.":
				m.Answer = append(m.Answer, a(name, "10.40.0.7"), a(name, "169.254.169.254"))
			case "private.example.com.":
				m.Answer = append(m.Answer, a(name, "10.9.9.9"))
			}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	for _, tc := range []struct {
		name, pod, host string
		port            string
		code            int
		extra           []string
	}{
		{"resolve-public-and-private", "shop/web-0", "api.example.com", "443", 0, nil},
		{"resolve-cidrs-and-metadata", "shop/web-0", "registry.corp.internal", "443", 0, nil},
		{"resolve-only-private", "shop/web-0", "private.example.com", "8443", 1, nil},
		{"resolve-only-private-audit", "shop/web-0", "private.example.com", "8443", 0, []string{"--mode", "audit"}},
		{"resolve-denied-shows-classes", "shop/other-0", "api.example.com", "443", 1, nil},
		{"resolve-dns", "shop/web-0", "registry.corp.internal", "", 0, []string{"--kind", "dns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--policy", explainPolicies, "--pods", explainPods, "--resolve",
				"--upstream-dns", pc.LocalAddr().String(), "--pod", tc.pod, "--host", tc.host}, tc.extra...)
			if tc.port != "" {
				args = append(args, "--port", tc.port)
			}
			code, out, errOut := runExplain(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s\n%s", code, tc.code, errOut, out)
			}
			checkGolden(t, tc.name+".txt", out)
		})
	}
}

func a(name, ip string) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}
}

func TestExplainUsage(t *testing.T) {
	files := []string{"--policy", explainPolicies, "--pods", explainPods}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no client", append(files, "--host", "a.example.com", "--port", "443"), "exactly one of --pod"},
		{"both clients", append(files, "--pod", "shop/web-0", "--ip", "10.0.0.1", "--host", "a.example.com", "--port", "443"), "exactly one of --pod"},
		{"pod without namespace", append(files, "--pod", "web-0", "--host", "a.example.com", "--port", "443"), "NAMESPACE/NAME"},
		{"bad ip", append(files, "--ip", "10.0.0", "--host", "a.example.com", "--port", "443"), "--ip"},
		{"no host", append(files, "--pod", "shop/web-0", "--port", "443"), "--host is required"},
		{"no port", append(files, "--pod", "shop/web-0", "--host", "a.example.com"), "--port is required"},
		{"port out of range", append(files, "--pod", "shop/web-0", "--host", "a.example.com", "--port", "70000"), "--port 70000"},
		{"dns with port", append(files, "--kind", "dns", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"), "drop --port"},
		{"bad kind", append(files, "--kind", "ftp", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "21"), "--kind"},
		{"bad mode", append(files, "--mode", "open", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"), "--mode"},
		{"bad output", append(files, "-o", "yaml", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"), "-o"},
		{"no sources", []string{"--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"}, "give --policy and --pods, or --kube"},
		{"kube and files", append(files, "--kube", "--namespace", "shop", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"), "drop --policy"},
		{"kube without namespace", []string{"--kube", "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"}, "--kube needs --namespace"},
		{"unreadable policy", []string{"--policy", "testdata/explain/nope.yaml", "--pods", explainPods, "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443"}, "nope.yaml"},
		{"stray argument", append(files, "--pod", "shop/web-0", "--host", "a.example.com", "--port", "443", "extra"), "unexpected argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runExplain(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q (want %q)\n%s", code, errOut, tc.want, out)
			}
		})
	}
}

// TestExplainKube: --kube reads the same policies and pods from a real API
// server and explains every case exactly as from the files; an
// EgressPolicy that fails validation is named and not in force, and
// explain writes nothing (no status condition appears).
func TestExplainKube(t *testing.T) {
	env := k8stest.Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)

	data, err := os.ReadFile(explainPolicies)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := policy.Parse(explainPolicies, data)
	if err != nil {
		t.Fatal(err)
	}
	inv := docs[0].Policy // a copy; its rules are replaced
	invalid := &inv
	invalid.Name = "e-invalid"
	invalid.Spec.Egress = []policy.EgressRule{{Hosts: []string{"*.com"}, Ports: []int32{443}}}
	for _, p := range append([]*policy.EgressPolicy{invalid}, policiesOf(docs)...) {
		p.Namespace = ns
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	pods, err := readPods([]string{explainPods})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		status := p.Status
		p.Namespace, p.ResourceVersion = ns, ""
		p.Spec.Containers = []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}
		created, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = status
		if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := env.Kubeconfig(t)

	for _, tc := range explainCases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--kube", "--kubeconfig", kubeconfig, "--namespace", ns}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "shop/", ns+"/"))
			}
			code, out, errOut := runExplain(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s\n%s", code, tc.code, errOut, out)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "explain", tc.name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			// The same text, in the test's namespace, with the invalid
			// object named.
			wantText := strings.ReplaceAll(string(want), "shop/", ns+"/")
			wantText = strings.ReplaceAll(wantText, "in namespace shop\n", "in namespace "+ns+"\n")
			got := out
			if tc.code != 2 {
				line := "invalid     EgressPolicy " + ns + "/e-invalid: spec.egress[0].hosts[0]"
				i := strings.Index(got, line)
				if i < 0 {
					t.Fatalf("no line %q:\n%s", line, got)
				}
				end := i + strings.IndexByte(got[i:], '\n') + 1
				got = got[:i] + got[end:]
			}
			if got != wantText {
				t.Fatalf("--kube output differs from the files':\n--- got\n%s--- want\n%s", got, wantText)
			}
		})
	}

	t.Run("pod outside the namespace", func(t *testing.T) {
		code, out, _ := runExplain(t, "--kube", "--kubeconfig", kubeconfig, "--namespace", ns,
			"--pod", "elsewhere/web-0", "--host", "api.example.com", "--port", "443")
		if code != 1 || !strings.Contains(out, "is not in namespace "+ns) || !strings.Contains(out, "reason unknown-client") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("explain writes no status", func(t *testing.T) {
		l, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range l.Items {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status"); found {
				t.Fatalf("%s has a status: explain must not write", u.GetName())
			}
		}
	})
}

func policiesOf(docs []policy.Document) []*policy.EgressPolicy {
	out := make([]*policy.EgressPolicy, 0, len(docs))
	for i := range docs {
		out = append(out, &docs[i].Policy)
	}
	return out
}
