package kube_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/policy"
)

// controllerRef makes obj's controller reference, as the Deployment and
// ReplicaSet controllers would (none runs here).
func controllerRef(apiVersion, kind string, obj metav1.Object) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
}

// TestPodWorkloadIdentity creates the chain a Deployment rollout leaves
// (Deployment → ReplicaSet <name>-<hash> → Pod labelled with the hash) and
// checks what the informer gives: the pod's UID, the workload resolved to
// the Deployment, and Initialized following the pod's condition, each
// change notified to the store's subscribers.
func TestPodWorkloadIdentity(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	c := env.Client
	h := run(t, ns, lean(t, env))
	var notified atomic.Int64
	t.Cleanup(h.store.Subscribe(func() { notified.Add(1) }))

	const hash = "7d9f8b6c5"
	labels := map[string]string{"app": "llm-server"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "fetch-weights", Image: "example.invalid/fetch:1"}},
			Containers:     []corev1.Container{{Name: "server", Image: "example.invalid/llm:1"}},
		},
	}
	dep, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-server"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsLabels := map[string]string{"app": "llm-server", "pod-template-hash": hash}
	rsTemplate := *template.DeepCopy()
	rsTemplate.Labels = rsLabels
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-server-" + hash, Labels: rsLabels, OwnerReferences: controllerRef("apps/v1", "Deployment", dep)},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: rsTemplate},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llm-server-" + hash + "-x2x8q", Labels: rsLabels, OwnerReferences: controllerRef("apps/v1", "ReplicaSet", rs)},
		Spec:       rsTemplate.Spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setStatus := func(phase corev1.PodPhase, initialized corev1.ConditionStatus) {
		t.Helper()
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = phase
		p.Status.PodIP = "10.244.3.7"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.3.7"}, {IP: "fd00:10:244:3::7"}}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: initialized},
		}
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set status: %v", err)
		}
	}
	lookup := func(ip string) *policy.Client {
		cl, _ := h.store.Lookup(netip.MustParseAddr(ip))
		return cl
	}

	setStatus(corev1.PodPending, corev1.ConditionFalse)
	eventually(t, "the pod's identity", func() bool { return lookup("10.244.3.7") != nil })
	for _, ip := range []string{"10.244.3.7", "fd00:10:244:3::7"} {
		cl := lookup(ip)
		want := policy.Workload{Kind: "Deployment", Name: "llm-server"}
		if cl.UID != string(pod.UID) || cl.Workload != want || cl.Initialized || cl.Pod != pod.Name {
			t.Errorf("%s: client %+v, want uid %s, workload %+v, not initialized", ip, cl, pod.UID, want)
		}
	}
	if byName, ok := h.store.Pod(ns, pod.Name); !ok || byName.UID != string(pod.UID) {
		t.Errorf("Pod(%s, %s) = %+v, %v", ns, pod.Name, byName, ok)
	}

	t.Run("init containers done", func(t *testing.T) {
		gen, before := h.store.Generation(), notified.Load()
		setStatus(corev1.PodRunning, corev1.ConditionTrue)
		eventually(t, "Initialized true", func() bool { return lookup("10.244.3.7").Initialized })
		if h.store.Generation() <= gen || notified.Load() <= before {
			t.Errorf("no change notified: generation %d → %d, notifications %d → %d", gen, h.store.Generation(), before, notified.Load())
		}
	})
	t.Run("initialized again (a restarted pod re-runs its init containers)", func(t *testing.T) {
		setStatus(corev1.PodRunning, corev1.ConditionFalse)
		eventually(t, "Initialized false", func() bool { return !lookup("10.244.3.7").Initialized })
	})
	t.Run("a bare pod is its own workload", func(t *testing.T) {
		makePod(t, c, ns, podSpec{name: "debug", ip: "10.244.3.8", phase: corev1.PodRunning})
		eventually(t, "bare pod", func() bool { return lookup("10.244.3.8") != nil })
		if got, want := lookup("10.244.3.8").Workload, (policy.Workload{Kind: "Pod", Name: "debug"}); got != want {
			t.Errorf("workload %+v, want %+v", got, want)
		}
	})
	t.Run("a replicaset created by hand stays a replicaset", func(t *testing.T) {
		hand, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "handmade", Labels: labels},
			Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "handmade-abcde", Labels: labels, OwnerReferences: controllerRef("apps/v1", "ReplicaSet", hand)},
			Spec:       template.Spec,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.3.9"}}
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "handmade pod", func() bool { return lookup("10.244.3.9") != nil })
		if got, want := lookup("10.244.3.9").Workload, (policy.Workload{Kind: "ReplicaSet", Name: "handmade"}); got != want {
			t.Errorf("workload %+v, want %+v", got, want)
		}
	})
	t.Run("deleted pod is a change", func(t *testing.T) {
		gen := h.store.Generation()
		deletePod(t, c, ns, pod.Name)
		eventually(t, "identity gone", func() bool { return lookup("10.244.3.7") == nil })
		if h.store.Generation() <= gen {
			t.Error("deletion not notified")
		}
	})
}
