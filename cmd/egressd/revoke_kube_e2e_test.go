package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
)

// TestEndToEndKubeRevocation: with --kube, an EgressPolicy edited through
// the API server cuts the tunnel its removed rule allowed, within a second
// of the update.
func TestEndToEndKubeRevocation(t *testing.T) { kubeRevocation(t, false) }

// TestFaultAPIServerAway: the API server disappears during traffic. The
// last snapshot keeps serving (the held tunnel flows, a new request is
// allowed); when it returns, a policy change made then applies and cuts
// the tunnel its removed rule allowed.
func TestFaultAPIServerAway(t *testing.T) { kubeRevocation(t, true) }

func kubeRevocation(t *testing.T, away bool) {
	env := k8stest.Start(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	w := startWorld(t)
	port, caFile := streamOrigin(t)

	var obj unstructured.Unstructured
	doc := strings.ReplaceAll(revokePolicy+strings.ReplaceAll(revokeRule, "PORT", port), "namespace: llm-prod", "namespace: "+ns)
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	policies := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)
	if _, err := policies.Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-0", Labels: map[string]string{"app": "llm-server"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/llm:1"}}},
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
	in := startEgressdArgs(t, w, "--kube", "--kubeconfig", env.Kubeconfig(t), "--namespace", ns)

	// The pod and the policy arrive through informers: wait until bytes of
	// the stream come through rather than for an internal event.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := exec.Command("curl", "-sS", "--max-time", "1", "--interface", "127.0.0.2", "--cacert", caFile,
			"--proxy", "http://"+in.proxy, "https://models.test:"+port+"/stream")
		probe.Env = append(os.Environ(), "NO_PROXY=", "no_proxy=")
		if out, _ := probe.Output(); len(out) > 0 {
			break
		}
		if time.Now().After(deadline) {
			resp, _ := http.Get("http://" + in.metrics + "/readyz")
			t.Fatalf("the stream never came through (readyz %v); audit:\n%s", resp, in.audit.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	in.audit.Reset() // the probes' records

	h := holdDownload(t, in, caFile, port)
	if away {
		env.KillAPIServer()
		probe := exec.Command("curl", "-sS", "--max-time", "2", "--interface", "127.0.0.2", "--cacert", caFile,
			"--proxy", "http://"+in.proxy, "https://models.test:"+port+"/stream")
		probe.Env = append(os.Environ(), "NO_PROXY=", "no_proxy=")
		if out, _ := probe.Output(); len(out) == 0 {
			t.Fatal("with the API server away, a new request to an allowed host got nothing: the last snapshot should serve")
		}
		select {
		case <-h.done:
			t.Fatalf("the held tunnel ended while the API server was away: %v: %s", h.err, h.errb.String())
		default:
		}
		if err := env.RestartAPIServer(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := policies.Get(ctx, "llm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	egress, _, _ := unstructured.NestedSlice(got.Object, "spec", "egress")
	if err := unstructured.SetNestedSlice(got.Object, egress[:1], "spec", "egress"); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	if _, err := policies.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	limit := time.Second
	if away {
		// The informers first watch the returned API server again (the
		// reflector's backoff), then the change applies within a second.
		limit = 30 * time.Second
	}
	// The held tunnel's record (a probe of the outage ended ok), waited
	// for as long as the cut may take, and a little more to say so.
	r := in.waitRecordWithin(t, "of the held tunnel", limit+5*time.Second, func(r map[string]any) bool {
		return r["kind"] == "connect" && r["host"] == "models.test" && r["outcome"] != "ok"
	})
	if r["outcome"] != "revoked" || r["verdict"] != "deny" || r["reason"] != "not-allowlisted" {
		t.Fatalf("record outcome %v verdict %v reason %v error %v", r["outcome"], r["verdict"], r["reason"], r["error"])
	}
	end, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
	if err != nil {
		t.Fatal(err)
	}
	if d := end.Sub(changed); d > limit {
		t.Fatalf("tunnel cut %v after the update, want within %v", d, limit)
	}
	t.Logf("tunnel cut %v after the update", end.Sub(changed))
	select {
	case <-h.done:
		if h.err == nil {
			t.Fatal("curl completed a download that never ends")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("curl still running after the tunnel's record")
	}
}
