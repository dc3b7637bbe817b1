package kube_test

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/egressd/egressd/internal/k8stest"
)

type podSpec struct {
	name        string
	ip          string
	phase       corev1.PodPhase
	hostNetwork bool
	sa          string
}

// makePod creates a pod, then sets its phase and IPs through the status
// subresource, as a kubelet would (there is none here).
func makePod(t *testing.T, c kubernetes.Interface, ns string, ps podSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ps.name, Labels: map[string]string{"app": ps.name}},
		Spec: corev1.PodSpec{
			Containers:         []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}},
			HostNetwork:        ps.hostNetwork,
			ServiceAccountName: ps.sa,
		},
	}
	p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", ps.name, err)
	}
	p.Status.Phase = ps.phase
	if ps.ip != "" {
		p.Status.PodIP = ps.ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ps.ip}}
	}
	p, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("set status of pod %s: %v", ps.name, err)
	}
	return p
}

func deletePod(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// TestPodIdentities follows pods through their life: the identity index
// tracks creation, status IPs, deletion and IP reuse, and never gives an
// identity to hostNetwork or finished pods, nor to an IP two pods claim.
func TestPodIdentities(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	h := run(t, ns, lean(t, env))
	c := env.Client

	podAt := func(ip string) string {
		cl, ok := h.store.Lookup(netip.MustParseAddr(ip))
		if !ok {
			return ""
		}
		return cl.Pod
	}
	waitPodAt := func(ip, want string) {
		t.Helper()
		eventually(t, ip+" → "+want, func() bool { return podAt(ip) == want })
	}

	t.Run("running pod gives an identity", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "web", ip: "10.244.0.7", phase: corev1.PodRunning, sa: "web-sa"})
		waitPodAt("10.244.0.7", "web")
		cl, _ := h.store.Lookup(netip.MustParseAddr("10.244.0.7"))
		if cl.Namespace != ns || cl.ServiceAccount != "web-sa" || cl.Labels["app"] != "web" {
			t.Errorf("client %+v", cl)
		}
	})
	t.Run("pending pod with an IP gives an identity", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "init", ip: "10.244.0.8", phase: corev1.PodPending})
		waitPodAt("10.244.0.8", "init")
	})
	// Markers: a later pod's identity appearing proves the index was rebuilt
	// after the ignored pod was seen.
	t.Run("hostNetwork pod is ignored", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "node-agent", ip: "10.244.0.9", phase: corev1.PodRunning, hostNetwork: true})
		makePod(t, c, ns, podSpec{name: "marker1", ip: "10.244.0.100", phase: corev1.PodRunning})
		waitPodAt("10.244.0.100", "marker1")
		if got := podAt("10.244.0.9"); got != "" {
			t.Errorf("hostNetwork pod gave identity %q", got)
		}
	})
	t.Run("succeeded and failed pods are ignored", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "job", ip: "10.244.0.10", phase: corev1.PodSucceeded})
		makePod(t, c, ns, podSpec{name: "crashed", ip: "10.244.0.11", phase: corev1.PodFailed})
		makePod(t, c, ns, podSpec{name: "marker2", ip: "10.244.0.101", phase: corev1.PodRunning})
		waitPodAt("10.244.0.101", "marker2")
		if got, got2 := podAt("10.244.0.10"), podAt("10.244.0.11"); got != "" || got2 != "" {
			t.Errorf("finished pods gave identities %q %q", got, got2)
		}
	})
	t.Run("pod finishing loses its identity", func(t *testing.T) {
		p, err := c.CoreV1().Pods(ns).Get(context.Background(), "init", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPodAt("10.244.0.8", "")
	})
	t.Run("deleted pod's IP is reused by a new pod", func(t *testing.T) {
		deletePod(t, c, ns, "web")
		waitPodAt("10.244.0.7", "")
		makePod(t, c, ns, podSpec{name: "web-2", ip: "10.244.0.7", phase: corev1.PodRunning})
		waitPodAt("10.244.0.7", "web-2")
	})
	t.Run("IP claimed by two live pods is unknown", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "dup", ip: "10.244.0.7", phase: corev1.PodRunning})
		waitPodAt("10.244.0.7", "")
		deletePod(t, c, ns, "dup")
		waitPodAt("10.244.0.7", "web-2")
	})
	t.Run("metrics", func(t *testing.T) {
		eventually(t, "identities gauge", func() bool { return gauge(h.metrics.Identities) == float64(h.store.Known()) && h.store.Known() == 3 })
	})
}
