package kube_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

// accepted returns the object's Accepted condition and status.observedGeneration.
func accepted(t *testing.T, res dynamic.ResourceInterface, name string) (*metav1.Condition, int64, int64) {
	t.Helper()
	u, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ep policy.EgressPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(ep.Status.Conditions, kube.ConditionAccepted), ep.Status.ObservedGeneration, ep.Generation
}

func waitAccepted(t *testing.T, res dynamic.ResourceInterface, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	eventually(t, name+" Accepted="+string(status)+" "+reason, func() bool {
		c, og, gen := accepted(t, res, name)
		last = c
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == gen && og == gen
	})
	return last
}

func allows(h *harness, ns, host string) bool {
	s, _ := h.snapshot()
	return s.Decide(policy.DecideArgs{
		Client: &policy.Client{Namespace: ns, Pod: "p", ServiceAccount: "default", Labels: map[string]string{"app": "web"}},
		Host:   host, Port: 443,
	}).Allowed()
}

func setHosts(t *testing.T, res dynamic.ResourceInterface, name string, hosts ...string) {
	t.Helper()
	u, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]any, len(hosts))
	for i, h := range hosts {
		hs[i] = h
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
	rules[0].(map[string]any)["hosts"] = hs
	if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "egress"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyStatus: every EgressPolicy gets Accepted with observedGeneration;
// an invalid update keeps the previous good version in force; an invalid new
// object allows nothing; a deleted one leaves the snapshot.
func TestPolicyStatus(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)
	h := run(t, ns, lean(t, env))
	ctx := context.Background()

	if allows(h, ns, "models.example.com") {
		t.Fatal("empty namespace allows something")
	}
	create := func(name, host string) {
		t.Helper()
		u := egp(t, ns, "metadata: {name: "+name+"}\nspec: {podSelector: {matchLabels: {app: web}}, egress: [{hosts: ["+host+"], ports: [443]}]}")
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("valid policy is accepted and in force", func(t *testing.T) {
		create("models", "models.example.com")
		waitAccepted(t, res, "models", metav1.ConditionTrue, kube.ReasonValid)
		eventually(t, "snapshot allows models.example.com", func() bool { return allows(h, ns, "models.example.com") })
		if gauge(h.metrics.Policies) != 1 {
			t.Errorf("policies gauge %v", gauge(h.metrics.Policies))
		}
	})
	t.Run("invalid update keeps the previous version in force", func(t *testing.T) {
		errsBefore := counter(h.metrics.ReloadErrors.WithLabelValues("kube"))
		setHosts(t, res, "models", "*.com") // the schema lets it through; Validate refuses a public suffix
		c := waitAccepted(t, res, "models", metav1.ConditionFalse, kube.ReasonInvalidPreviousInForce)
		if !strings.Contains(c.Message, "*.com") || !strings.Contains(c.Message, "generation 1 stays in force") {
			t.Errorf("message %q", c.Message)
		}
		if !allows(h, ns, "models.example.com") || allows(h, ns, "other.com") {
			t.Error("snapshot is not the previous good version")
		}
		if counter(h.metrics.ReloadErrors.WithLabelValues("kube")) <= errsBefore {
			t.Error("reload error not counted")
		}
	})
	t.Run("fixed update is accepted", func(t *testing.T) {
		setHosts(t, res, "models", "weights.example.com")
		waitAccepted(t, res, "models", metav1.ConditionTrue, kube.ReasonValid)
		eventually(t, "snapshot follows", func() bool {
			return allows(h, ns, "weights.example.com") && !allows(h, ns, "models.example.com")
		})
	})
	t.Run("invalid new policy allows nothing", func(t *testing.T) {
		create("broad", `"**.co.uk"`)
		c := waitAccepted(t, res, "broad", metav1.ConditionFalse, kube.ReasonInvalid)
		if !strings.Contains(c.Message, "co.uk") {
			t.Errorf("message %q", c.Message)
		}
		if allows(h, ns, "shop.example.co.uk") || !allows(h, ns, "weights.example.com") {
			t.Error("an invalid policy changed what is allowed")
		}
	})
	t.Run("status writes settle", func(t *testing.T) {
		// A status write is an update event; it must not cause another write
		// nor another snapshot.
		_, sets := h.snapshot()
		u, err := res.Get(ctx, "models", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		create("marker", "marker.example.com")
		waitAccepted(t, res, "marker", metav1.ConditionTrue, kube.ReasonValid)
		eventually(t, "marker in force", func() bool { return allows(h, ns, "marker.example.com") })
		u2, err := res.Get(ctx, "models", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u.GetResourceVersion() != u2.GetResourceVersion() {
			t.Errorf("an unchanged policy's status was rewritten:\nbefore %v\nafter  %v", u.Object["status"], u2.Object["status"])
		}
		if _, sets2 := h.snapshot(); sets2 != sets+1 {
			t.Errorf("SetPolicy called %d times for one change", sets2-sets)
		}
	})
	t.Run("deleted policy leaves the snapshot", func(t *testing.T) {
		if err := res.Delete(ctx, "models", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "deleted policy gone", func() bool { return !allows(h, ns, "weights.example.com") })
		if !allows(h, ns, "marker.example.com") {
			t.Error("other policy lost")
		}
	})
}

// TestAPIServerLoss: losing the API server keeps the last snapshot and
// identities in force and says so (Stale, the stale gauge); when it comes
// back, the gauge clears and updates resume.
func TestAPIServerLoss(t *testing.T) {
	env := k8stest.Start(t) // its own control plane: this test stops it
	ns := env.Namespace(t)
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)
	u := egp(t, ns, "metadata: {name: p}\nspec: {egress: [{hosts: [models.example.com], ports: [443]}]}")
	if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makePod(t, env.Client, ns, podSpec{name: "web", ip: "10.244.2.7", phase: corev1.PodRunning})
	h := run(t, ns, lean(t, env))
	eventually(t, "policy in force", func() bool { return allows(h, ns, "models.example.com") })
	eventually(t, "identity", func() bool { return h.store.Known() == 1 })
	if h.ctrl.Stale() || gauge(h.metrics.PolicyStale) != 0 {
		t.Fatal("stale while connected")
	}
	_, sets := h.snapshot()

	env.KillAPIServer()
	eventually(t, "stale reported", func() bool { return h.ctrl.Stale() && gauge(h.metrics.PolicyStale) == 1 })
	if !allows(h, ns, "models.example.com") {
		t.Error("snapshot lost with the API server")
	}
	if c, ok := h.store.Lookup(netip.MustParseAddr("10.244.2.7")); !ok || c.Pod != "web" {
		t.Error("identities lost with the API server")
	}
	if _, sets2 := h.snapshot(); sets2 != sets {
		t.Error("SetPolicy called while the API server was gone")
	}
	if !h.ctrl.Synced() {
		t.Error("Synced dropped: egressd would turn unready and drop traffic it can still decide")
	}

	if err := env.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "stale cleared", func() bool { return !h.ctrl.Stale() && gauge(h.metrics.PolicyStale) == 0 })
	setHosts(t, res, "p", "weights.example.com")
	eventually(t, "updates resume", func() bool {
		return allows(h, ns, "weights.example.com") && !allows(h, ns, "models.example.com")
	})
}
