package webhook_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/kube/rbac"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/webhook"
)

const secretName = "egressd-webhook-cert"

// clock is the certificate manager's clock; the API server verifies with
// the real one, so a test moves it by less than the certificates'
// one-hour backdating.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// harness is one namespace with egressd's webhook registered and serving.
type harness struct {
	env        *k8stest.Env
	ns, config string
	server     *webhook.Server
	certs      *webhook.CertManager
	clock      *clock
	certDir    string
	addr       string
	sa         *rest.Config // the ServiceAccount the certificate manager runs as
}

// webhookConfig is what the chart renders, with a url instead of a
// Service reference: the namespace and objectSelector, failurePolicy
// Ignore, reinvocationPolicy IfNeeded.
func webhookConfig(name, ns, url string, bundle []byte) *admissionregv1.MutatingWebhookConfiguration {
	ignore, ifNeeded, none := admissionregv1.Ignore, admissionregv1.IfNeededReinvocationPolicy, admissionregv1.SideEffectClassNone
	timeout := int32(5)
	scope := admissionregv1.NamespacedScope
	return &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:         "inject.egressd.dev",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: bundle},
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule:       admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &scope},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: inject.AnnotationInject, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}}}},
			FailurePolicy:           &ignore,
			ReinvocationPolicy:      &ifNeeded,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
		}},
	}
}

// serviceAccount returns a config for a ServiceAccount of ns bound to
// exactly the webhook certificate's rules (rbac.WebhookRoleRules and
// rbac.WebhookClusterRoleRules).
func serviceAccount(t *testing.T, env *k8stest.Env, ns, config string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	name := "egressd"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(err)
	_, err = c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rbac.WebhookRoleRules(secretName)}, metav1.CreateOptions{})
	must(err)
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects}, metav1.CreateOptions{})
	must(err)
	_, err = c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: config}, Rules: rbac.WebhookClusterRoleRules(config)}, metav1.CreateOptions{})
	must(err)
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: config},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: config}, Subjects: subjects}, metav1.CreateOptions{})
	must(err)
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(err)
	return env.UserConfig(tr.Status.Token)
}

// start registers and serves egressd's webhook for a fresh namespace;
// mods change the mutation's configuration.
func start(t *testing.T, mods ...func(*inject.Config)) *harness {
	t.Helper()
	env := k8stest.Shared(t)
	h := &harness{env: env, ns: env.Namespace(t), clock: &clock{t: time.Now()}, certDir: t.TempDir()}
	h.config = "egressd-" + h.ns
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	// The chart's configuration: no caBundle until egressd patches it.
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(h.config, h.ns, "https://"+h.addr+webhook.Path, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), h.config, metav1.DeleteOptions{})
	})
	h.sa = serviceAccount(t, env, h.ns, h.config)
	secrets, patcher, err := kube.NewWebhookClients(h.sa, h.ns, secretName, h.config)
	if err != nil {
		t.Fatal(err)
	}
	h.certs, err = webhook.NewCertManager(webhook.CertManagerConfig{
		Service: "egressd", Namespace: h.ns, ExtraHosts: []string{"127.0.0.1"}, CertDir: h.certDir,
		Secrets: secrets, Webhook: patcher, Now: h.clock.now,
		CAValidity: 90 * time.Minute, CertValidity: time.Hour, RenewBefore: 20 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.certs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	icfg := inject.Config{ProxyURL: "http://egressd." + h.ns + ".svc:3128", Version: "test", Never: policy.NeverPrefixes()}
	for _, m := range mods {
		m(&icfg)
	}
	h.server, err = webhook.New(webhook.Config{Namespace: h.ns, CertDir: h.certDir, ReloadEvery: 20 * time.Millisecond, Inject: icfg})
	if err != nil {
		t.Fatal(err)
	}
	go h.server.Run(ctx)
	go func() { _ = h.server.Serve(ln) }()
	t.Cleanup(func() { _ = h.server.Shutdown(context.Background()) })
	h.waitInjecting(t)
	return h
}

// waitInjecting waits until the API server, whose webhook configurations
// reach its admission chain through an informer, injects a dry-run pod.
func (h *harness) waitInjecting(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := h.create(t, h.ns, pod("probe", nil), true)
		if err == nil && p.Annotations[inject.AnnotationInjected] != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server did not call the webhook within 30s (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the API server's informer, which has no event to wait on
	}
}

// create creates p in ns (dryRun: the API server runs admission, stores
// nothing) and returns the admitted object as the API server returns it.
func (h *harness) create(t *testing.T, ns string, p *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	t.Helper()
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return h.env.Client.CoreV1().Pods(ns).Create(context.Background(), p, opts)
}

func pod(name string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

// servedSerial is the serial number of the certificate the webhook serves.
func (h *harness) servedSerial(t *testing.T) string {
	t.Helper()
	c, err := tls.Dial("tcp", h.addr, &tls.Config{InsecureSkipVerify: true}) // only reading the serial
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
