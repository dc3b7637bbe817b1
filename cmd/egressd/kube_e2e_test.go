package main

// `egressd run --kube` and `egressd netpol` against a real kube-apiserver
// and etcd (internal/k8stest): policies and identities come from the API.

import (
	"bytes"
	"context"
	"net/http"
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
)

func TestEndToEndKube(t *testing.T) {
	env := k8stest.Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	w := startWorld(t)

	var obj unstructured.Unstructured
	doc := strings.ReplaceAll(strings.ReplaceAll(e2ePolicy, "PORT", w.port), "namespace: llm-prod", "namespace: "+ns)
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns).Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-0", Labels: map[string]string{"app": "llm-server"}},
		Spec: corev1.PodSpec{ServiceAccountName: "llm-server",
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/llm:1"}}},
	}
	pod, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.2"}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	kubeconfig := env.Kubeconfig(t)
	in := startEgressdArgs(t, w, "--kube", "--kubeconfig", kubeconfig, "--namespace", ns)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + in.metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("egressd --kube never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The pod's identity and the policy arrive through informers: wait for
	// the allowed request rather than for an internal event.
	url := "https://models.test:" + w.port + "/"
	for {
		code, body, _ := in.curl(t, w, "127.0.0.2", "-f", url)
		if code == 0 && body == "hello from models.test" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allowed request never succeeded; audit:\n%s", in.audit.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec := in.waitRecord(t, "allowing models.test", hostIs("connect", "models.test", "allow"))
	if c := rec["client"].(map[string]any); c["pod"] != "llm-0" || c["namespace"] != ns {
		t.Errorf("client %v", c)
	}
	if code, _, _ := in.curl(t, w, "127.0.0.2", "-f", "https://exfil.test:"+w.port+"/"); code == 0 {
		t.Error("exfil.test allowed")
	}
	// kubectl describe pod shows why: a Warning Event EgressDenied on the
	// pod, naming host, port, reason and the policy that selects it.
	for {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=llm-0"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs.Items {
			if ev.Reason == "EgressDenied" && ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.UID == pod.UID &&
				strings.Contains(ev.Message, "exfil.test:"+w.port) && strings.Contains(ev.Message, "not-allowlisted") &&
				strings.Contains(ev.Message, ns+"/llm") {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no EgressDenied Event on the pod: %+v", evs.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The policy's status says it was accepted.
	for {
		got, err := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns).Get(ctx, "llm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		if len(conds) > 0 && conds[0].(map[string]any)["status"] == "True" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Accepted=True condition: %v", got.Object["status"])
		}
		time.Sleep(20 * time.Millisecond)
	}

	t.Run("netpol print, apply and check", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := dispatch(ctx, []string{"netpol", "--namespace", ns}, &out, &errb); code != 0 {
			t.Fatalf("netpol: %d %s", code, errb.String())
		}
		for _, want := range []string{"kind: NetworkPolicy", "169.254.0.0/16", "0.0.0.0/0", "port: 5353", "protocol: UDP"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("netpol output lacks %q", want)
			}
		}
		out.Reset()
		if code := dispatch(ctx, []string{"netpol", "--namespace", ns, "--kubeconfig", kubeconfig, "--apply"}, &out, &errb); code != 0 {
			t.Fatalf("netpol --apply: %d %s", code, errb.String())
		}
		list, err := env.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("applied policies: %v %v", list, err)
		}
		if code := dispatch(ctx, []string{"netpol", "--namespace", ns, "--kubeconfig", kubeconfig, "--check"}, &out, &errb); code != 0 {
			t.Fatalf("netpol --check after apply: %d\n%s%s", code, out.String(), errb.String())
		}
		// One broad policy opens what the others close: --check finds it.
		broad := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "allow-all-egress"},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}}}}},
			},
		}
		if _, err := env.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, broad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if code := dispatch(ctx, []string{"netpol", "--namespace", ns, "--kubeconfig", kubeconfig, "--check"}, &out, &errb); code != 1 {
			t.Fatalf("netpol --check with a broad policy: exit %d, want 1\n%s", code, out.String())
		}
		if !strings.Contains(out.String()+errb.String(), "allow-all-egress") {
			t.Errorf("--check does not name the policy:\n%s", out.String())
		}
	})
}
