package kube_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/internal/k8stest"
)

// TestClientWebhookResources: the two resources the injection webhook
// keeps, through the lean client on the real API server: its Secret
// (create, get, update; protobuf on the wire) and its webhook
// configuration's caBundle (a JSON patch through the dynamic client).
func TestClientWebhookResources(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	c := lean(t, env)

	t.Run("secret", func(t *testing.T) {
		s, err := c.Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "egressd-webhook"},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"tls.crt": []byte("crt"), "tls.key": []byte("key")},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data["tls.crt"] = []byte("renewed")
		if _, err := c.Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Secrets(ns).Get(ctx, "egressd-webhook", metav1.GetOptions{})
		if err != nil || string(got.Data["tls.crt"]) != "renewed" || got.Type != corev1.SecretTypeOpaque {
			t.Fatalf("got %+v, %v", got, err)
		}
	})

	t.Run("webhook caBundle", func(t *testing.T) {
		never := "https://127.0.0.1:1/never"
		none := admissionregistrationv1.SideEffectClassNone
		ignore := admissionregistrationv1.Ignore
		name := "egressd-test-" + ns
		if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "inject.egressd.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &never},
				SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"},
				// Selects nothing: no admission anywhere calls it.
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"egressd.dev/test-never": "true"}},
			}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		})
		ca := []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n")
		patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/webhooks/0/clientConfig/caBundle",
			"value": base64.StdEncoding.EncodeToString(ca)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil || string(got.Webhooks[0].ClientConfig.CABundle) != string(ca) {
			t.Fatalf("caBundle %q, %v", got.Webhooks[0].ClientConfig.CABundle, err)
		}
	})
}
