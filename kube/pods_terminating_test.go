package kube_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/internal/k8stest"
)

// TestTerminatingPodIdentity, on the real API server: a pod is deleted
// (a finalizer keeps its object, as a slow kubelet or a controller's
// finalizer would) and its IP given to a new pod before the old object is
// gone. While the old pod's container runs, the IP is ambiguous (no
// identity: unknown-client); once the container terminated, the IP is the
// new pod's, never the old one's (issue 25; cilium#16565, antrea#6507).
func TestTerminatingPodIdentity(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	h := run(t, ns, lean(t, env))
	c := env.Client
	ctx := context.Background()
	const ip = "10.244.3.7"
	podAt := func() string {
		cl, ok := h.store.Lookup(netip.MustParseAddr(ip))
		if !ok {
			return ""
		}
		return cl.Pod
	}
	wait := func(want string) {
		t.Helper()
		eventually(t, ip+" → "+want, func() bool { return podAt() == want })
	}

	old := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{"app": "old"}, Finalizers: []string{"egressd.dev/test-hold"}},
		// Scheduled, as a running pod is: the API server deletes a pod
		// that no node holds at once (grace period 0), whatever was asked.
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1"}}},
	}
	old, err := c.CoreV1().Pods(ns).Create(ctx, old, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the namespace go: the finalizer was only to keep the object.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
		c.CoreV1().Pods(ns).Patch(context.Background(), "old", types.MergePatchType, patch, metav1.PatchOptions{})
	})
	old.Status.Phase, old.Status.PodIP, old.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	old.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "example.invalid/app:1", ImageID: "x",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("old")

	grace := int64(600)
	if err := c.CoreV1().Pods(ns).Delete(ctx, "old", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	// Its sandbox is torn down and its IP given to a new pod while the
	// old object stays.
	makePod(t, c, ns, podSpec{name: "new", ip: ip, phase: corev1.PodRunning})
	wait("")
	old, err = c.CoreV1().Pods(ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil || old.DeletionTimestamp == nil {
		t.Fatalf("old pod %v, deletionTimestamp %v: want it still there, being deleted", err, old.GetDeletionTimestamp())
	}
	old.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
		StartedAt: old.Status.ContainerStatuses[0].State.Running.StartedAt, FinishedAt: metav1.Now()}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("new")
}
