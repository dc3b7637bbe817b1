package chart_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
)

func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

// standInCRD is a CRD for an operator's kind that the test API server does
// not have. It checks kind, group and metadata only (spec is preserved
// unvalidated); the chart tests of each kind check the spec's shape.
func standInCRD(group, kind string) string {
	plural := strings.ToLower(kind) + "s"
	return `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + "." + group + `
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `, kind: ` + kind + `, listKind: ` + kind + `List}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
}

// standIns are the Prometheus Operator's ServiceMonitor (TestServiceMonitor)
// and PrometheusRule (TestPrometheusRule), and cert-manager's Issuer and
// Certificate (TestInjectionWebhook), by group.
var standIns = []struct{ group, kind string }{
	{"monitoring.coreos.com", "ServiceMonitor"}, {"monitoring.coreos.com", "PrometheusRule"},
	{"cert-manager.io", "Issuer"}, {"cert-manager.io", "Certificate"},
}

// TestServerSideDryRun applies every rendered object, with defaults and with
// every option on, to a real kube-apiserver with a server-side dry run: the
// API server's own validation (schemas, the EgressPolicy CRD's rules,
// NetworkPolicy ipBlock/except consistency, immutable selectors) is the judge.
func TestServerSideDryRun(t *testing.T) {
	helmBin(t) // fail (or skip) on a missing helm before starting a control plane
	env := k8stest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range standIns {
		installCRD(ctx, t, env, standInCRD(c.group, c.kind), c.kind)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Client.Discovery()))
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			ns := env.Namespace(t)
			objs := render(t, ns, vs.files)
			if len(objs) == 0 {
				t.Fatal("nothing rendered")
			}
			if vs.name == "all-on" {
				// The helm test hook, its probe file and the monitoring
				// objects are judged here too.
				for _, k := range []string{"Pod", "ConfigMap", "PrometheusRule", "ServiceMonitor",
					"MutatingWebhookConfiguration", "Certificate", "Issuer"} {
					if len(ofKind(objs, k)) == 0 {
						t.Errorf("all-on renders no %s", k)
					}
				}
			}
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s %s: no such resource on the API server: %v", gvk, o.GetName(), err)
					continue
				}
				ri := env.Dynamic.Resource(m.Resource)
				var r applier = ri
				if m.Scope.Name() == "namespace" {
					if o.GetNamespace() != ns {
						t.Errorf("%s %s: namespace %q, want the release namespace %q", gvk.Kind, o.GetName(), o.GetNamespace(), ns)
					}
					r = ri.Namespace(ns)
				}
				if err := dryRunApply(ctx, r, o); err != nil {
					t.Errorf("%s %s rejected by the API server: %v", gvk.Kind, o.GetName(), err)
				}
			}
		})
	}

	// Negative control: the dry run does validate. An except outside its
	// cidr is the mistake the API server must catch.
	t.Run("rejects a broken NetworkPolicy", func(t *testing.T) {
		ns := env.Namespace(t)
		np := find(t, render(t, ns, nil, "networkPolicy.enabled=true"), "NetworkPolicy", "egressd").DeepCopy()
		egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
		to := egress[0].(map[string]any)["to"].([]any)
		to[1].(map[string]any)["ipBlock"].(map[string]any)["except"] = []any{"10.0.0.0/8"}
		if err := unstructured.SetNestedSlice(np.Object, egress, "spec", "egress"); err != nil {
			t.Fatal(err)
		}
		r := env.Dynamic.Resource(networkingv1.SchemeGroupVersion.WithResource("networkpolicies")).Namespace(ns)
		if err := dryRunApply(ctx, r, np); !apierrors.IsInvalid(err) {
			t.Fatalf("dry run of an IPv4 except inside ::/0: err = %v, want Invalid", err)
		}
	})
}

type applier interface {
	Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
}

// dryRunApply is kubectl apply --server-side --dry-run=server.
func dryRunApply(ctx context.Context, r applier, o *unstructured.Unstructured) error {
	_, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "egressd-chart-test", Force: true, DryRun: []string{metav1.DryRunAll}})
	return err
}

// installCRD creates a CRD (once per control plane) and waits until kind is
// served.
func installCRD(ctx context.Context, t *testing.T, env *k8stest.Env, doc, kind string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := env.Dynamic.Resource(k8stest.CRDResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create CRD %s: %v", u.GetName(), err)
	}
	group, _, _ := unstructured.NestedString(obj, "spec", "group")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := env.Client.Discovery().ServerResourcesForGroupVersion(group + "/v1")
		if err == nil {
			for _, r := range res.APIResources {
				if r.Kind == kind {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not served: %v", u.GetName(), err)
		case <-tick.C:
		}
	}
}

// TestNotes renders NOTES.txt through a server-side dry-run install (helm
// template does not render NOTES): the workload snippet, and the resolver
// address taken from service.clusterIP or, failing that, looked up from the
// live Service.
func TestNotes(t *testing.T) {
	helmBin(t)
	env := k8stest.Shared(t)
	kubeconfig := env.Kubeconfig(t)
	// Both spellings of each, as the injection webhook sets them (curl
	// reads http_proxy only in lower case, some clients only upper case).
	proxyVars := []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}
	common := func(ns string) []string {
		want := []string{
			"name: NO_PROXY\n          value: localhost,127.0.0.1,.svc,.cluster.local,10.96.0.0/12\n",
			"name: no_proxy\n          value: localhost,127.0.0.1,.svc,.cluster.local,10.96.0.0/12\n",
			`dnsPolicy: "None"`, ns + ".svc.cluster.local", "svc.cluster.local",
			// the webhook's (and the kubelet's) ndots
			"- name: ndots\n        value: \"5\"\n",
			// break-glass, naming release and chart
			"helm upgrade egressd CHART -n " + ns + " --reuse-values --set mode=audit",
			// every replica's records, not one pod's last lines
			"logs -l app.kubernetes.io/name=egressd --prefix --tail=-1",
		}
		for _, v := range proxyVars {
			want = append(want, "name: "+v+"\n          value: http://egressd."+ns+".svc.cluster.local:3128\n")
		}
		return want
	}
	commonNot := []string{"logs deploy/", `value: "2"`}
	cases := []struct {
		name     string
		sets     []string
		existing string // ClusterIP of an egressd Service created beforehand; empty for none
		want     []string
		notWant  []string
	}{
		{name: "clusterIP from values", sets: []string{"service.clusterIP=10.96.0.53"}, want: []string{"- 10.96.0.53"}, notWant: []string{"has no ClusterIP yet"}},
		{name: "clusterIP looked up", existing: "10.96.7.7", want: []string{"- 10.96.7.7"}, notWant: []string{"has no ClusterIP yet"}},
		{name: "no clusterIP yet", want: []string{"<egressd Service ClusterIP>", "has no ClusterIP yet"}},
		{name: "defaults: audit, the next step", sets: []string{"service.clusterIP=10.96.0.53"}, want: []string{"in audit mode, without NetworkPolicies", `"would_deny": true`, "egressd report records.log",
			"Next step", "egressd preflight --namespace {ns} --since 24h records.log",
			"helm upgrade egressd CHART -n {ns} --reuse-values --set mode=enforce --set networkPolicy.enabled=true\n"}},
		{name: "enforce with NetworkPolicies", sets: []string{"mode=enforce", "networkPolicy.enabled=true", "service.clusterIP=10.96.0.53"},
			want: []string{"in enforce mode.\n"}, notWant: []string{"Next step", "preflight", "--set mode=enforce"}},
		{name: "injection", sets: []string{"inject.enabled=true", "service.clusterIP=10.96.0.53"},
			want: []string{"Injection is on", `egressd.dev/inject: "false"`, "DNS only with inject.dns", "by hand (what injection adds)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t)
			if c.existing != "" {
				// As an earlier release left it: Helm's ownership metadata lets
				// this install adopt it, as an upgrade would.
				_, err := env.Client.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{
						Name:        "egressd",
						Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
						Annotations: map[string]string{"meta.helm.sh/release-name": releaseName, "meta.helm.sh/release-namespace": ns},
					},
					Spec: corev1.ServiceSpec{ClusterIP: c.existing, Ports: []corev1.ServicePort{{Name: "proxy", Port: 3128}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// Free the address for the next run of the shared API server
				// (go test -count=N).
				t.Cleanup(func() {
					_ = env.Client.CoreV1().Services(ns).Delete(context.Background(), "egressd", metav1.DeleteOptions{})
				})
			}
			args := []string{"install", releaseName, chartDir(t), "--dry-run=server", "--kubeconfig", kubeconfig, "--namespace", ns, "--skip-crds"}
			for _, s := range c.sets {
				args = append(args, "--set", s)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			notes := string(out)
			if i := strings.Index(notes, "NOTES:"); i >= 0 {
				notes = notes[i:]
			} else {
				t.Fatalf("no NOTES in the output:\n%s", out)
			}
			want := slices.Clone(c.want)
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "{ns}", ns)
			}
			for _, w := range append(common(ns), want...) {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, w := range append(commonNot, c.notWant...) {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES hold %q:\n%s", w, notes)
				}
			}
		})
	}
}
