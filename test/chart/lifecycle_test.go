package chart_test

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/egressd/egressd/internal/k8stest"
)

// TestBreakGlassLifecycle runs the break-glass and rollback of
// docs/operations.md with helm against the real API server: the last step
// to enforce (mode enforce, NetworkPolicies on), back to audit in one
// `helm upgrade --reuse-values --set mode=audit` (NetworkPolicies kept),
// `helm rollback` to enforce, and `helm uninstall`, which must leave no
// NetworkPolicy behind while the EgressPolicy CRD stays (Helm never
// deletes CRDs). Nothing runs the pods (no kubelet): the Deployment's
// spec is what is judged.
func TestBreakGlassLifecycle(t *testing.T) {
	helmBin(t)
	env := k8stest.Shared(t)
	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	helm := func(args ...string) {
		t.Helper()
		if out, err := runHelm(t, append(args, "--kubeconfig", kubeconfig, "--namespace", ns)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	mode := func() string {
		t.Helper()
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "egressd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return argValue(d.Spec.Template.Spec.Containers[0].Args, "--mode")
	}
	netpols := func() []string {
		t.Helper()
		l, err := env.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, np := range l.Items {
			names = append(names, np.Name)
		}
		slices.Sort(names)
		return names
	}
	both := []string{"egressd", "egressd-workloads"}

	helm("install", releaseName, chartDir(t), "--skip-crds", "--set", "mode=enforce", "--set", "networkPolicy.enabled=true")
	if m, np := mode(), netpols(); m != "enforce" || !slices.Equal(np, both) {
		t.Fatalf("installed: --mode %q, NetworkPolicies %v", m, np)
	}
	helm("upgrade", releaseName, chartDir(t), "--reuse-values", "--set", "mode=audit")
	if m, np := mode(), netpols(); m != "audit" || !slices.Equal(np, both) {
		t.Errorf("after break-glass: --mode %q, NetworkPolicies %v (want audit, both kept)", m, np)
	}
	helm("rollback", releaseName, "1")
	if m := mode(); m != "enforce" {
		t.Errorf("after helm rollback to revision 1: --mode %q", m)
	}
	helm("uninstall", releaseName)
	if np := netpols(); len(np) != 0 {
		t.Errorf("helm uninstall left NetworkPolicies %v", np)
	}
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := env.Dynamic.Resource(crd).Get(ctx, "egresspolicies.egressd.dev", metav1.GetOptions{}); err != nil {
		t.Errorf("the EgressPolicy CRD after helm uninstall: %v (want it kept)", err)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "egressd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment after helm uninstall: %v", err)
	}
}
