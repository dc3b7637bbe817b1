package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/kube/rbac"
	"github.com/egressd/egressd/netpol"
)

// TestRoleYAMLMatchesRules holds config/rbac/role.yaml (which the chart
// mirrors) to RoleRules.
func TestRoleYAMLMatchesRules(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []rbacv1.Role
	for {
		var r rbacv1.Role
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Kind == "Role" {
			roles = append(roles, r)
		}
	}
	if len(roles) != 2 {
		t.Fatalf("role.yaml: %d Roles, want 2 (egressd, egressd-netpol-apply)", len(roles))
	}
	all := rbac.RoleRules(true)
	if !reflect.DeepEqual(roles[0].Rules, rbac.RoleRules(false)) {
		t.Errorf("Role %s rules %+v, want %+v", roles[0].Name, roles[0].Rules, rbac.RoleRules(false))
	}
	if !reflect.DeepEqual(roles[1].Rules, all[len(rbac.RoleRules(false)):]) {
		t.Errorf("Role %s rules %+v, want %+v", roles[1].Name, roles[1].Rules, all[len(rbac.RoleRules(false)):])
	}
}

// serviceAccountClients creates a ServiceAccount bound to a Role holding
// exactly rules, and returns clients that authenticate with its token
// (TokenRequest API).
func serviceAccountClients(t *testing.T, env *k8stest.Env, ns, name string, rules []rbacv1.PolicyRule) *kube.Client {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	cfg := env.UserConfig(tr.Status.Token)
	kc, err := kube.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestRBACLeastPrivilege runs the controller and the Event emitter as a
// ServiceAccount bound to exactly RoleRules(false): it syncs, writes status,
// creates an Event and patches its count; verbs outside the Role are
// forbidden. RoleRules(true) adds exactly what --apply needs.
func TestRBACLeastPrivilege(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	kc := serviceAccountClients(t, env, ns, "egressd", rbac.RoleRules(false))

	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)
	if _, err := res.Create(ctx, egp(t, ns, "metadata: {name: p}\nspec: {egress: [{hosts: [models.example.com], ports: [443]}]}"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	makePod(t, env.Client, ns, podSpec{name: "web", ip: "10.244.1.7", phase: corev1.PodRunning})

	h := run(t, ns, kc)
	waitAccepted(t, res, "p", metav1.ConditionTrue, kube.ReasonValid) // status written with the SA's rights
	eventually(t, "identity", func() bool { return h.store.Known() == 1 })
	eventually(t, "policy", func() bool { return allows(h, ns, "models.example.com") })

	t.Run("events create and patch", func(t *testing.T) {
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clock := &fakeClock{now: time.Unix(1e9, 0)}
		em := newEmitter(t, kc, clock, nil)
		em.Record(denial(pod, "exfil.example.com", 443, "not-allowlisted"))
		waitEvent(t, env.Client, pod, "exfil.example.com") // created
		clock.Add(kube.DefaultEventInterval)
		em.Record(denial(pod, "exfil.example.com", 443, "not-allowlisted"))
		eventually(t, "the Event's count patched to 2", func() bool {
			ev := eventFor(t, env.Client, pod, "exfil.example.com")
			return ev != nil && ev.Count == 2
		})
	})

	forbidden := []struct {
		name string
		do   func() error
	}{
		{"delete pods", func() error { return kc.Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}) }},
		{"list secrets", func() error { _, err := kc.Secrets(ns).List(ctx, metav1.ListOptions{}); return err }},
		{"get pods (list/watch only)", func() error { _, err := kc.Pods(ns).Get(ctx, "web", metav1.GetOptions{}); return err }},
		{"list pods in another namespace", func() error { _, err := kc.Pods("default").List(ctx, metav1.ListOptions{}); return err }},
		{"update egresspolicies", func() error {
			u, err := res.Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = kc.EgressPolicies(ns).Update(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{"delete egresspolicies", func() error {
			return kc.EgressPolicies(ns).Delete(ctx, "p", metav1.DeleteOptions{})
		}},
		{"list events", func() error { _, err := kc.Events(ns).List(ctx, metav1.ListOptions{}); return err }},
		{"delete events", func() error {
			return kc.Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}},
		{"create events in another namespace", func() error {
			_, err := kc.Events("default").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "x"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "x"},
				Reason:         kube.EventReasonDenied, Type: corev1.EventTypeWarning,
			}, metav1.CreateOptions{})
			return err
		}},
		{"apply networkpolicies without --apply rights", func() error {
			_, err := kube.ApplyNetworkPolicies(ctx, kc, netpol.NetworkPolicies(netpol.Options{Namespace: ns}))
			return err
		}},
	}
	for _, tc := range forbidden {
		t.Run("forbidden/"+tc.name, func(t *testing.T) {
			if err := tc.do(); !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want Forbidden", err)
			}
		})
	}

	t.Run("apply rights", func(t *testing.T) {
		akc := serviceAccountClients(t, env, ns, "egressd-apply", rbac.RoleRules(true))
		opts := netpol.Options{Namespace: ns}
		if _, err := kube.ApplyNetworkPolicies(ctx, akc, netpol.NetworkPolicies(opts)); err != nil {
			t.Fatalf("apply: %v", err)
		}
		if found, err := kube.CheckNamespace(ctx, akc, opts); err != nil || len(found) != 0 {
			t.Fatalf("check: %v %v", found, err)
		}
		if err := akc.NetworkPolicies(ns).Delete(ctx, netpol.EgressdName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("delete networkpolicies: got %v, want Forbidden", err)
		}
	})
}
