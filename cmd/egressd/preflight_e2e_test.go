package main

// `egressd preflight` against a real kube-apiserver and etcd
// (internal/k8stest): pods, the Service, NetworkPolicies and EgressPolicies
// come from the API, records from a file and from stdin.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/record"
)

func TestPreflightKube(t *testing.T) {
	env := k8stest.Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kubeconfig := env.Kubeconfig(t)
	core := env.Client.CoreV1()
	const egressdIP = "10.96.0.53"

	if _, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "egressd"},
		Spec:       corev1.ServiceSpec{ClusterIP: egressdIP, Ports: []corev1.ServicePort{{Name: "proxy", Port: 3128}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxyEnv := []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://egressd." + ns + ".svc.cluster.local:3128"}}
	mkPod := func(name string, labels map[string]string, env []corev1.EnvVar, dns *corev1.PodDNSConfig) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1", Env: env}}},
		}
		if dns != nil {
			p.Spec.DNSPolicy, p.Spec.DNSConfig = corev1.DNSNone, dns
		}
		p, err := core.Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		if _, err := core.Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	egressdDNS := &corev1.PodDNSConfig{Nameservers: []string{egressdIP}}
	mkPod("llm-server-0", map[string]string{"app": "llm-server"}, proxyEnv, egressdDNS)
	mkPod("batch-0", map[string]string{"app": "batch"}, nil, nil)
	mkPod("egressd-0", map[string]string{"app.kubernetes.io/name": "egressd"}, nil, nil)

	var egp unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(`apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm-trial}
spec:
  mode: audit
  podSelector: {matchLabels: {app: llm-server}}
  egress: [{hosts: [models.example.com], ports: [443]}]
`), &egp.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns).Create(ctx, &egp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC()
	line := func(at time.Time, host, reason string, wouldDeny bool) string {
		r := record.Record{Time: at, Start: at, Event: "end", ID: host + at.String(), Kind: "connect", Host: host, Port: 443,
			Verdict: "allow", WouldDeny: wouldDeny, Reason: reason, Mode: "audit",
			Client: record.Client{IP: "10.0.0.7", Namespace: ns, Pod: "llm-server-0", ServiceAccount: "default",
				Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return "[pod/egressd-0/egressd] " + string(b) + "\n"
	}
	dir := t.TempDir()
	records := filepath.Join(dir, "records.log")
	if err := os.WriteFile(records, []byte(
		line(now.Add(-48*time.Hour), "old.example.com", "not-allowlisted", true)+
			line(now.Add(-time.Hour), "models.example.com", "allowed", false)+
			line(now.Add(-30*time.Minute), "pastebin.example.org", "not-allowlisted", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	allowedOnly := line(now.Add(-time.Hour), "models.example.com", "allowed", false)

	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := dispatchIO(ctx, append([]string{"preflight", "--kubeconfig", kubeconfig}, args...), strings.NewReader(stdin), &out, &errb)
		return code, out.String(), errb.String()
	}

	t.Run("not safe: a pod without a way through, a would-deny host, an audit policy", func(t *testing.T) {
		code, out, errs := run("", "--namespace", ns, "--since", "24h", records)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
		}
		for _, w := range []string{
			"Pods that would lose egress under the NetworkPolicy (1 of 2)", "batch-0", "container app: no HTTPS_PROXY", "DNS: dnsPolicy ClusterFirst",
			"Deployment/llm-server  pastebin.example.org", "not-allowlisted",
			"Policies in audit mode", "llm-trial", "not safe: ",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		for _, w := range []string{"old.example.com", "egressd-0", "llm-server-0"} {
			if strings.Contains(out, w) {
				t.Errorf("output holds %q (outside the window, egressd itself, a pod that reaches egressd):\n%s", w, out)
			}
		}
	})

	t.Run("the namespace's own NetworkPolicy decides which pods are confined", func(t *testing.T) {
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "egressd-workloads"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm-server"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			},
		}
		if _, err := env.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		code, out, errs := run(allowedOnly, "--namespace", ns, "--json", "-")
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", code, out, errs)
		}
		var res struct {
			Safe          bool     `json:"safe"`
			PodsChecked   int      `json:"pods_checked"`
			Resolvers     []string `json:"resolvers"`
			AuditPolicies []string `json:"audit_policies"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if !res.Safe || res.PodsChecked != 1 || len(res.Resolvers) != 1 || res.Resolvers[0] != egressdIP || len(res.AuditPolicies) != 1 {
			t.Errorf("%+v", res)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{records}, "--namespace is required"},
			{[]string{"--namespace", ns, "--since", "yesterday", records}, "--since"},
			{[]string{"--namespace", ns, "--resolver", "egressd", records}, `--resolver "egressd": want an IP address`},
		} {
			if code, out, errs := run("", c.args...); code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("%v: exit %d, stderr %q (want 2 and %q)\n%s", c.args, code, errs, c.want, out)
			}
		}
	})
}
