package chart_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/kube/rbac"
)

func selfManagedValues(t testing.TB) string {
	return filepath.Join(chartDir(t), "ci", "inject-self-managed-values.yaml")
}

// argValue is the value after flag in args, or "".
func argValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestInjectionWebhook: the webhook objects of both certificate modes, and
// none by default.
func TestInjectionWebhook(t *testing.T) {
	const ns = "llm-prod"
	t.Run("defaults render no webhook", func(t *testing.T) {
		objs := render(t, ns, nil)
		for _, k := range []string{"MutatingWebhookConfiguration", "Certificate", "Issuer", "ClusterRole", "HorizontalPodAutoscaler"} {
			if n := len(ofKind(objs, k)); n != 0 {
				t.Errorf("%d %s by default", n, k)
			}
		}
		d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
		if slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--webhook-addr") || d.Spec.Replicas == nil {
			t.Errorf("default Deployment: args %v, replicas %v", d.Spec.Template.Spec.Containers[0].Args, d.Spec.Replicas)
		}
	})
	for _, tc := range []struct {
		name        string
		files       []string
		certManager bool
		failure     admissionregv1.FailurePolicyType
	}{
		{"self-managed certificate", []string{selfManagedValues(t)}, false, admissionregv1.Fail},
		{"cert-manager", []string{allOnValues(t)}, true, admissionregv1.Ignore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, ns, tc.files)
			cfg := fromUnstructured[admissionregv1.MutatingWebhookConfiguration](t, find(t, objs, "MutatingWebhookConfiguration", "egressd-llm-prod"))
			if len(cfg.Webhooks) != 1 {
				t.Fatalf("%d webhooks", len(cfg.Webhooks))
			}
			w := cfg.Webhooks[0]
			svc := w.ClientConfig.Service
			if svc == nil || svc.Name != "egressd" || svc.Namespace != ns || *svc.Path != "/inject" || *svc.Port != 9443 || len(w.ClientConfig.CABundle) != 0 {
				t.Errorf("clientConfig %+v", w.ClientConfig)
			}
			if !reflect.DeepEqual(w.NamespaceSelector, &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}) {
				t.Errorf("namespaceSelector %+v selects more than the release namespace", w.NamespaceSelector)
			}
			wantObj := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: inject.AnnotationInject, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}}}}
			if !reflect.DeepEqual(w.ObjectSelector, wantObj) {
				t.Errorf("objectSelector %+v", w.ObjectSelector)
			}
			if *w.FailurePolicy != tc.failure || *w.ReinvocationPolicy != admissionregv1.IfNeededReinvocationPolicy || *w.SideEffects != admissionregv1.SideEffectClassNone {
				t.Errorf("failurePolicy %s reinvocationPolicy %s sideEffects %s", *w.FailurePolicy, *w.ReinvocationPolicy, *w.SideEffects)
			}
			if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregv1.OperationType{admissionregv1.Create}) || !slices.Equal(w.Rules[0].Resources, []string{"pods"}) {
				t.Errorf("rules %+v", w.Rules)
			}
			if got := cfg.Annotations["cert-manager.io/inject-ca-from"]; tc.certManager != (got == ns+"/egressd-webhook") {
				t.Errorf("inject-ca-from %q", got)
			}

			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			pod := d.Spec.Template
			if pod.Labels[inject.AnnotationInject] != "false" {
				t.Errorf("egressd's own pods lack the opt-out label: %v", pod.Labels)
			}
			if _, ok := d.Spec.Selector.MatchLabels[inject.AnnotationInject]; ok {
				t.Error("the opt-out label joined the Deployment's (immutable) selector")
			}
			args := pod.Spec.Containers[0].Args
			if argValue(args, "--webhook-addr") != ":9443" || argValue(args, "--webhook-cert-dir") != "/run/egressd/webhook" || argValue(args, "--webhook-service") != "egressd" {
				t.Errorf("args %v", args)
			}
			if got := argValue(args, "--webhook-secret"); (got != "") == tc.certManager || !tc.certManager && (got != "egressd-webhook-tls" || argValue(args, "--webhook-configuration") != "egressd-llm-prod") {
				t.Errorf("self-managed flags: %v", args)
			}
			var vol *corev1.Volume
			for i := range pod.Spec.Volumes {
				if pod.Spec.Volumes[i].Name == "webhook-cert" {
					vol = &pod.Spec.Volumes[i]
				}
			}
			if vol == nil || tc.certManager != (vol.Secret != nil && vol.Secret.SecretName == "egressd-webhook-tls") || !tc.certManager && vol.EmptyDir == nil {
				t.Errorf("webhook-cert volume %+v", vol)
			}
			s := fromUnstructured[corev1.Service](t, find(t, objs, "Service", "egressd"))
			if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Name == "webhook" && p.Port == 9443 && p.TargetPort.StrVal == "webhook"
			}) {
				t.Errorf("Service ports %+v lack webhook", s.Spec.Ports)
			}

			if tc.certManager {
				if n := len(ofKind(objs, "ClusterRole")); n != 0 {
					t.Errorf("cert-manager mode renders %d ClusterRoles", n)
				}
				find(t, objs, "Certificate", "egressd-webhook")
				find(t, objs, "Issuer", "egressd-webhook-selfsigned")
				if !slices.Contains(args, "--inject-dns") || argValue(args, "--inject-dns") != "10.96.0.53" || argValue(args, "--inject-apiserver") != "10.96.0.1" {
					t.Errorf("all-on args %v", args)
				}
				return
			}
			// Least privilege, the same rules kube declares.
			role := fromUnstructured[rbacv1.Role](t, find(t, objs, "Role", "egressd-webhook"))
			if !reflect.DeepEqual(role.Rules, rbac.WebhookRoleRules("egressd-webhook-tls")) {
				t.Errorf("Role rules %+v, want rbac.WebhookRoleRules", role.Rules)
			}
			cr := fromUnstructured[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "egressd-llm-prod-webhook"))
			if !reflect.DeepEqual(cr.Rules, rbac.WebhookClusterRoleRules("egressd-llm-prod")) {
				t.Errorf("ClusterRole rules %+v, want rbac.WebhookClusterRoleRules", cr.Rules)
			}
			crb := fromUnstructured[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "egressd-llm-prod-webhook"))
			if crb.RoleRef.Name != cr.Name || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "egressd" || crb.Subjects[0].Namespace != ns {
				t.Errorf("ClusterRoleBinding %+v", crb)
			}
		})
	}
}

func TestAutoscaling(t *testing.T) {
	objs := render(t, "llm-prod", []string{selfManagedValues(t)})
	hpa := fromUnstructured[autoscalingv2.HorizontalPodAutoscaler](t, find(t, objs, "HorizontalPodAutoscaler", "egressd"))
	if hpa.Spec.ScaleTargetRef.Name != "egressd" || hpa.Spec.ScaleTargetRef.Kind != "Deployment" || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 8 ||
		*hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 {
		t.Errorf("HPA spec %+v", hpa.Spec)
	}
	d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d beside the HPA: every upgrade would reset its count", *d.Spec.Replicas)
	}
}

func TestInjectRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		sets []string
		want string
	}{
		{"dns without a cluster IP", []string{"inject.enabled=true", "inject.dns=true"}, "service.clusterIP"},
		{"wildcard no-proxy", []string{"inject.enabled=true", "inject.noProxy[0]=*"}, "noProxy"},
		{"list in one no-proxy entry", []string{"inject.enabled=true", "inject.noProxy[0]=a.svc\\,b.svc"}, "noProxy"},
		{"bad failure policy", []string{"inject.enabled=true", "inject.failurePolicy=Deny"}, "failurePolicy"},
		{"timeout over 30s", []string{"inject.enabled=true", "inject.timeoutSeconds=31"}, "timeoutSeconds"},
		{"autoscaling min over max", []string{"autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=3"}, "maxReplicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, "llm-prod", nil, c.sets...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one mentioning %q\n%s", err, c.want, out)
			}
		})
	}
}
