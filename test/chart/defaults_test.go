package chart_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestDefaultInstallBreaksNothing holds the default values to "helm install
// changes no running pod's connectivity" (docs/operations.md, "From install
// to enforce"): audit mode, no NetworkPolicy (egressd-workloads would cut
// every pod of the namespace off from everything but egressd), no
// injection webhook (it changes pods as they are created). Enforce and the
// NetworkPolicies are the explicit last step.
func TestDefaultInstallBreaksNothing(t *testing.T) {
	objs := render(t, "llm-prod", nil)
	d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	if got := argValue(d.Spec.Template.Spec.Containers[0].Args, "--mode"); got != "audit" {
		t.Errorf("default --mode %q, want audit", got)
	}
	for _, kind := range []string{"NetworkPolicy", "MutatingWebhookConfiguration"} {
		if got := ofKind(objs, kind); len(got) != 0 {
			t.Errorf("the defaults render %s", kinds(got))
		}
	}
	// The staged path's last step renders both NetworkPolicies and enforce.
	objs = render(t, "llm-prod", nil, "mode=enforce", "networkPolicy.enabled=true")
	find(t, objs, "NetworkPolicy", "egressd-workloads")
	find(t, objs, "NetworkPolicy", "egressd")
	d = fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	if got := argValue(d.Spec.Template.Spec.Containers[0].Args, "--mode"); got != "enforce" {
		t.Errorf("--set mode=enforce renders --mode %q", got)
	}
}
