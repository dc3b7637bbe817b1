package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/webhook"
)

// TestRunSelfManagedCertificate: the built `egressd run --kube` with
// --webhook-secret makes the Secret, patches the configuration's caBundle,
// and serves the webhook with a certificate that verifies against that
// bundle for the Service's name.
func TestRunSelfManagedCertificate(t *testing.T) {
	h := &harness{env: k8stest.Shared(t)}
	h.ns = h.env.Namespace(t)
	ctx := context.Background()
	config := "egressd-" + h.ns
	if _, err := h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		webhookConfig(config, h.ns, "https://127.0.0.1:1/inject", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), config, metav1.DeleteOptions{})
	})
	line := startIn(t, "egressd", exec.Command(build(t, "./cmd/egressd"), "run", "--kube", "--kubeconfig", h.env.Kubeconfig(t),
		"--namespace", h.ns, "--proxy-addr", "127.0.0.1:0", "--dns-addr", "", "--metrics-addr", "", "--upstream-dns", "127.0.0.1:1",
		"--webhook-addr", "127.0.0.1:0", "--webhook-cert-dir", t.TempDir(),
		"--webhook-secret", secretName, "--webhook-configuration", config), "webhook serving")
	var serving struct{ Addr string }
	if err := json.Unmarshal([]byte(line), &serving); err != nil || serving.Addr == "" {
		t.Fatalf("log line %q: %v", line, err)
	}

	sec, err := h.env.Client.CoreV1().Secrets(h.ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := h.env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, config, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle := cfg.Webhooks[0].ClientConfig.CABundle
	if sec.Type != corev1.SecretTypeTLS || len(bundle) == 0 || !bytes.Equal(bundle, sec.Data[webhook.SecretCA]) {
		t.Fatalf("Secret type %s, caBundle %q: want the Secret's ca.crt patched in", sec.Type, bundle)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "egressd." + h.ns + ".svc"}}
	defer tr.CloseIdleConnections()
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",
	  "resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"` + h.ns + `",
	  "object":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	resp, err := (&http.Client{Transport: tr}).Post("https://"+serving.Addr+webhook.Path, "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatalf("the webhook's certificate does not verify against the caBundle for the Service name: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"allowed":true`) || !strings.Contains(string(body), `"patchType":"JSONPatch"`) {
		t.Fatalf("review answer %d %s", resp.StatusCode, body)
	}
}
