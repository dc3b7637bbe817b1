package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/webhook"
)

func TestMain(m *testing.M) {
	code := k8stest.Main(m)
	binaries.Range(func(_, v any) bool {
		if p := v.(*builtBinary).path; p != "" {
			_ = os.RemoveAll(filepath.Dir(p))
		}
		return true
	})
	os.Exit(code)
}

func proxyEnv(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if strings.Contains(strings.ToLower(e.Name), "proxy") {
			m[e.Name] = e.Value
		}
	}
	return m
}

// TestInjectionThroughAPIServer: pods created through the API server come
// back injected, or not, as docs/design.md says.
func TestInjectionThroughAPIServer(t *testing.T) {
	h := start(t)
	want := "http://egressd." + h.ns + ".svc:3128"
	other := h.env.Namespace(t)
	cases := []struct {
		name     string
		ns       string
		pod      *corev1.Pod
		injected bool
		check    func(t *testing.T, p *corev1.Pod)
	}{
		{name: "direct pod", pod: pod("direct", nil), injected: true},
		{name: "init containers", pod: pod("init", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "curl"}}
		}), injected: true, check: func(t *testing.T, p *corev1.Pod) {
			if proxyEnv(p.Spec.InitContainers[0])["https_proxy"] != want {
				t.Errorf("init container env %v", p.Spec.InitContainers[0].Env)
			}
		}},
		{name: "env already set", pod: pod("set", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://corp:8080"}}
		}), injected: true, check: func(t *testing.T, p *corev1.Pod) {
			e := proxyEnv(p.Spec.Containers[0])
			if e["HTTPS_PROXY"] != "http://corp:8080" || e["https_proxy"] != "" || e["HTTP_PROXY"] != want {
				t.Errorf("env %v: the container's own pair must stay, the others be added", e)
			}
		}},
		{name: "opted out by label (not called)", pod: pod("label", func(p *corev1.Pod) {
			p.Labels = map[string]string{inject.AnnotationInject: "false"}
		})},
		{name: "opted out by annotation", pod: pod("annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{inject.AnnotationInject: "false"}
		})},
		{name: "namespace not selected", ns: other, pod: pod("elsewhere", nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = h.ns
			}
			got, err := h.create(t, ns, tc.pod, false)
			if err != nil {
				t.Fatal(err)
			}
			// Read back what the API server stored.
			got, err = h.env.Client.CoreV1().Pods(ns).Get(context.Background(), got.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			mark := got.Annotations[inject.AnnotationInjected]
			if (mark == "test") != tc.injected {
				t.Fatalf("injected mark %q, want injected %v", mark, tc.injected)
			}
			e := proxyEnv(got.Spec.Containers[0])
			if tc.injected && tc.check == nil && (e["HTTPS_PROXY"] != want || !strings.HasPrefix(e["no_proxy"], "localhost,127.0.0.1,::1,.svc,")) {
				t.Errorf("env %v", e)
			}
			if !tc.injected && len(e) != 0 {
				t.Errorf("not injected, but env %v", e)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// sidecarWebhook is a second mutating webhook, ordered after egressd's
// (configurations are called by name), that adds a container.
func sidecarWebhook(t *testing.T, h *harness) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if !bytes.Contains(review.Request.Object.Raw, []byte(`"late-sidecar"`)) {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(`[{"op":"add","path":"/spec/containers/-","value":{"name":"late-sidecar","image":"sidecar"}}]`), &pt
		}
		out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := webhookConfig("zz-sidecar-"+h.ns, h.ns, srv.URL+"/", bundle)
	never := cfg.Webhooks[0].ReinvocationPolicy
	*never = "Never"
	cfg.Webhooks[0].Name = "sidecar.test.dev"
	cfg.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sidecar": "yes"}}
	ctx := context.Background()
	if _, err := h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
}

// TestReinvocation: a container that a later webhook adds gets the env,
// because egressd is registered with reinvocationPolicy IfNeeded.
func TestReinvocation(t *testing.T) {
	h := start(t)
	sidecarWebhook(t, h)
	want := "http://egressd." + h.ns + ".svc:3128"
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := h.create(t, h.ns, pod("reinvoked", func(p *corev1.Pod) { p.Labels = map[string]string{"sidecar": "yes"} }), true)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Spec.Containers) == 2 { // the sidecar webhook is in the chain now
			for _, c := range p.Spec.Containers {
				if proxyEnv(c)["HTTPS_PROXY"] != want {
					t.Fatalf("container %s env %v: not injected after the later webhook added it", c.Name, c.Env)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sidecar webhook was not called within 30s")
		}
		time.Sleep(50 * time.Millisecond) // the API server's webhook informer has no event to wait on
	}
}

// TestWebhookDown: with egressd's webhook unreachable, failurePolicy
// Ignore admits the pod unchanged (it then cannot get out: the boundary is
// the NetworkPolicy).
func TestWebhookDown(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	h := &harness{env: env, ns: ns}
	ctx := context.Background()
	name := "egressd-down-" + ns
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(name, ns, "https://"+addr+webhook.Path, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	p, err := h.create(t, ns, pod("admitted", nil), false)
	if err != nil {
		t.Fatalf("pod refused with the webhook down: %v (failurePolicy must be Ignore)", err)
	}
	if p.Annotations[inject.AnnotationInjected] != "" || len(proxyEnv(p.Spec.Containers[0])) != 0 {
		t.Fatalf("pod injected with the webhook down: %v", p)
	}
}

// TestCertificateRenewal: the manager's clock moves past the renewal
// point of the serving certificate and of its root; the Secret and the
// configuration's caBundle (both roots) are updated, the webhook serves
// the new certificate and the API server keeps calling it.
func TestCertificateRenewal(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	before := h.servedSerial(t)
	h.clock.t = h.clock.t.Add(45 * time.Minute) // root: 45m left < 1h; leaf: 15m left < 20m
	if err := h.certs.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	sec, err := h.env.Client.CoreV1().Secrets(h.ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, h.config, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, sec.Data[webhook.SecretCA]) || bytes.Count(got, []byte("BEGIN CERTIFICATE")) != 2 {
		t.Fatalf("caBundle %q, want the Secret's two roots", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.servedSerial(t) == before {
		if time.Now().After(deadline) {
			t.Fatal("the webhook still serves the old certificate")
		}
		time.Sleep(20 * time.Millisecond) // the certificate directory is polled
	}
	h.waitInjecting(t)
	p, err := h.create(t, h.ns, pod("after-renewal", nil), false)
	if err != nil || p.Annotations[inject.AnnotationInjected] != "test" {
		t.Fatalf("after renewal: %v, annotations %v", err, p.Annotations)
	}
}

// TestCertificateRBAC: the rules the chart grants reach the webhook's own
// Secret and configuration only.
func TestCertificateRBAC(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	env := h.env
	otherConfig := "egressd-other-" + h.ns
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(otherConfig, "nowhere", "https://127.0.0.1:1/inject", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), otherConfig, metav1.DeleteOptions{})
	})
	if _, err := env.Client.CoreV1().Secrets(h.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-token"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret, config, err := kube.NewWebhookClients(h.sa, h.ns, "app-token", otherConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"get another secret", func() error { _, _, _, err := secret.Get(ctx); return err }},
		{"update another secret", func() error { _, err := secret.Update(ctx, map[string][]byte{"x": nil}, "1"); return err }},
		{"patch another webhook configuration", func() error { return config.PatchCABundle(ctx, []byte("x")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err == nil || !strings.Contains(err.Error(), ": 403: ") {
				t.Fatalf("got %v, want 403 Forbidden", err)
			}
		})
	}
}
