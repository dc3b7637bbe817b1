package preflight

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

const ns = "llm-prod"

// everyPodButEgressd is the chart's default egressd-workloads selector.
var everyPodButEgressd = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: "app.kubernetes.io/name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"egressd"}},
}}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withProxy(p *corev1.Pod) {
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://egressd:3128"})
	}
}

func withDNS(servers ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.DNSPolicy = corev1.DNSNone
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: servers}
	}
}

func injected(p *corev1.Pod) { p.Annotations = map[string]string{inject.AnnotationInjected: "v1"} }

func TestPods(t *testing.T) {
	const egressdIP = "10.96.0.53"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string // problems; nil: the pod reaches egressd (or is not checked)
	}{
		{"proxy and DNS", pod("ok", withProxy, withDNS(egressdIP), injected), nil},
		{"nothing", pod("bare"), []string{"container app: no HTTPS_PROXY", "DNS: dnsPolicy ClusterFirst, not egressd's resolver"}},
		{"proxy, cluster DNS", pod("proxy-only", withProxy, injected), []string{"DNS: dnsPolicy ClusterFirst, not egressd's resolver"}},
		{"DNS elsewhere too", pod("two-dns", withProxy, withDNS(egressdIP, "10.96.0.10")), []string{"DNS: dnsPolicy None, nameservers [10.96.0.53 10.96.0.10], not only egressd's [10.96.0.53]"}},
		{"init container without proxy", pod("init", withProxy, withDNS(egressdIP), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "fetch-weights"}}
		}), []string{"init container fetch-weights: no HTTPS_PROXY"}},
		{"lower-case spelling from a Secret", pod("lower", withDNS(egressdIP), func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "https_proxy", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "url"}}}}
		}), nil},
		{"envFrom", pod("envfrom", withDNS(egressdIP), func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}
		}), []string{"container app: no HTTPS_PROXY in env (envFrom not read)"}},
		{"egressd itself", pod("egressd-0", func(p *corev1.Pod) { p.Labels["app.kubernetes.io/name"] = "egressd" }), nil},
		{"host network", pod("node-agent", func(p *corev1.Pod) { p.Spec.HostNetwork = true }), nil},
		{"finished", pod("job-done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), nil},
		{"other namespace", pod("elsewhere", func(p *corev1.Pod) { p.Namespace = "other" }), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk, err := New(Config{Namespace: ns, Confine: everyPodButEgressd, Resolvers: []string{egressdIP}})
			if err != nil {
				t.Fatal(err)
			}
			chk.Pods([]*corev1.Pod{c.pod})
			res := chk.Result()
			var got []string
			if len(res.Pods) == 1 {
				got = res.Pods[0].Problems
				if w := res.Pods[0].Workload; w != "Pod/"+c.pod.Name {
					t.Errorf("workload %q", w)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("problems %q\nwant     %q", got, c.want)
			}
		})
	}
	t.Run("no NetworkPolicy: not checked", func(t *testing.T) {
		chk, err := New(Config{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		chk.Pods([]*corev1.Pod{pod("bare")})
		if res := chk.Result(); len(res.Pods) != 0 || res.PodsChecked != 0 {
			t.Errorf("%+v", res)
		}
	})
}

func rec(at time.Time, podName, host, reason string, wouldDeny bool) *auditlog.Record {
	r := &auditlog.Record{Record: record.Record{
		Time: at, Kind: "connect", Host: host, Port: 443, Verdict: "allow", WouldDeny: wouldDeny, Reason: reason, Mode: "audit",
		Client: record.Client{IP: "10.0.0.7", Namespace: ns, Pod: podName, Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
	}}
	if podName == "" {
		r.Client = record.Client{IP: "10.0.9.9"}
		r.Verdict, r.Reason = "deny", "unknown-client"
	}
	return r
}

func TestRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	since := t0.Add(time.Hour)
	chk, err := New(Config{Namespace: ns, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	chk.Policies([]policy.Document{
		{Policy: policy.EgressPolicy{ObjectMeta: metav1.ObjectMeta{Name: "trial"}, Spec: policy.EgressPolicySpec{Mode: policy.ModeAudit}}},
		{Policy: policy.EgressPolicy{ObjectMeta: metav1.ObjectMeta{Name: "llm-bootstrap"}}},
	})
	for _, r := range []*auditlog.Record{
		rec(t0, "llm-server-1", "before.example.com", "not-allowlisted", true), // before the window
		rec(since.Add(1*time.Minute), "llm-server-1", "models.example.com", "allowed", false),
		rec(since.Add(2*time.Minute), "llm-server-1", "pastebin.example.org", "not-allowlisted", true),
		rec(since.Add(3*time.Minute), "llm-server-2", "pastebin.example.org", "port-not-allowed", true),
		rec(since.Add(4*time.Minute), "", "metadata.google.internal", "", false),
		func() *auditlog.Record { // another namespace's
			r := rec(since.Add(5*time.Minute), "x", "other.example.com", "not-allowlisted", true)
			r.Client.Namespace = "other"
			return r
		}(),
		func() *auditlog.Record { // egressd probe's outside control
			r := rec(since.Add(6*time.Minute), "probe", "egressd-probe.invalid", "not-allowlisted", true)
			r.Probe = "outside"
			return r
		}(),
	} {
		chk.Add(r)
	}
	res := chk.Result()
	if res.Safe {
		t.Error("safe with would-deny records")
	}
	if res.Records != 4 {
		t.Errorf("records %d, want 4 (in the window, of the namespace, no probe)", res.Records)
	}
	if len(res.WouldDeny) != 1 {
		t.Fatalf("would-deny %+v, want one workload and host pair", res.WouldDeny)
	}
	d := res.WouldDeny[0]
	if d.Workload != "Deployment/llm-server" || d.Host != "pastebin.example.org" || d.Requests != 2 ||
		!slices.Equal(d.Reasons, []string{"not-allowlisted", "port-not-allowed"}) || !d.First.Equal(since.Add(2*time.Minute)) || !d.Last.Equal(since.Add(3*time.Minute)) {
		t.Errorf("would-deny %+v", d)
	}
	if len(res.Unknown) != 1 || res.Unknown[0].IP != "10.0.9.9" || res.Unknown[0].Hosts[0] != "metadata.google.internal" {
		t.Errorf("unknown %+v", res.Unknown)
	}
	if !slices.Equal(res.AuditPolicies, []string{"trial"}) {
		t.Errorf("audit policies %v", res.AuditPolicies)
	}
	var text, js bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Deployment/llm-server  pastebin.example.org  443", "not-allowlisted,port-not-allowed", "10.0.9.9", "Policies in audit mode", "trial", "not safe: "} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, text.String())
		}
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Safe || len(back.WouldDeny) != 1 {
		t.Errorf("JSON %v: %s", err, js.String())
	}
}

func TestSafe(t *testing.T) {
	cases := []struct {
		name string
		recs []*auditlog.Record
		pods []*corev1.Pod
		safe bool
	}{
		{"allowed only", []*auditlog.Record{rec(time.Now(), "p", "models.example.com", "allowed", false)}, []*corev1.Pod{pod("p", withProxy, withDNS("10.96.0.53"))}, true},
		{"unknown clients do not count against enforce", []*auditlog.Record{
			rec(time.Now(), "p", "models.example.com", "allowed", false), rec(time.Now(), "", "x.example.com", "", false)}, nil, true},
		{"no record", nil, nil, false},
		{"a pod without a way through", []*auditlog.Record{rec(time.Now(), "p", "models.example.com", "allowed", false)}, []*corev1.Pod{pod("p")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk, err := New(Config{Namespace: ns, Confine: everyPodButEgressd, Resolvers: []string{"10.96.0.53"}})
			if err != nil {
				t.Fatal(err)
			}
			chk.Pods(c.pods)
			for _, r := range c.recs {
				chk.Add(r)
			}
			var out bytes.Buffer
			res := chk.Result()
			if err := res.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			if res.Safe != c.safe {
				t.Errorf("safe %v, want %v:\n%s", res.Safe, c.safe, out.String())
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "--namespace is required") {
		t.Errorf("no namespace: %v", err)
	}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	if _, err := New(Config{Namespace: ns, Confine: bad}); err == nil {
		t.Error("a bad selector accepted")
	}
}
