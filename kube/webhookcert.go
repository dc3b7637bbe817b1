package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The webhook's self-managed certificate reaches the API through plain
// REST calls on client-go's authenticated HTTP client: one Secret
// (get, create, update) and one MutatingWebhookConfiguration (get,
// patch). No typed clientset, so nothing here pulls in the API groups'
// registrations (issue 17, the lean binary); the methods are those of
// webhook.SecretStore and webhook.CABundlePatcher, which cmd wires. Their
// RBAC rules are kube/rbac's WebhookRoleRules and WebhookClusterRoleRules
// (outside the binary).

// WebhookSecret is one Secret of a namespace.
type WebhookSecret struct {
	api             *restAPI
	namespace, name string
}

// WebhookConfig is one MutatingWebhookConfiguration.
type WebhookConfig struct {
	api  *restAPI
	name string
}

type restAPI struct {
	c    *http.Client
	host string
}

// NewWebhookClients returns the Secret and webhook configuration clients
// for the webhook's certificate, authenticated as cfg says.
func NewWebhookClients(cfg *rest.Config, namespace, secret, webhookConfig string) (*WebhookSecret, *WebhookConfig, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kube: webhook client: %w", err)
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	api := &restAPI{c: c, host: host}
	return &WebhookSecret{api: api, namespace: namespace, name: secret}, &WebhookConfig{api: api, name: webhookConfig}, nil
}

// do sends one request; out, when not nil, receives a 2xx JSON body. It
// returns the status code, and an error for a failed request or an
// unexpected status (not 2xx, not in ok).
func (a *restAPI) do(ctx context.Context, method, path, contentType string, body any, out any, ok ...int) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("kube: encode %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.host+path, r)
	if err != nil {
		return 0, fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	for _, c := range ok {
		if resp.StatusCode == c {
			return c, nil
		}
	}
	if resp.StatusCode/100 != 2 {
		var st metav1.Status
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return resp.StatusCode, fmt.Errorf("kube: %s %s: %d: %s", method, path, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("kube: decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (s *WebhookSecret) path(name bool) string {
	p := "/api/v1/namespaces/" + url.PathEscape(s.namespace) + "/secrets"
	if name {
		p += "/" + url.PathEscape(s.name)
	}
	return p
}

// Get returns the Secret's data and resourceVersion, found false on 404.
func (s *WebhookSecret) Get(ctx context.Context) (map[string][]byte, string, bool, error) {
	var sec corev1.Secret
	code, err := s.api.do(ctx, http.MethodGet, s.path(true), "", nil, &sec, http.StatusNotFound)
	if err != nil || code == http.StatusNotFound {
		return nil, "", false, err
	}
	return sec.Data, sec.ResourceVersion, true, nil
}

func (s *WebhookSecret) object(data map[string][]byte, version string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, ResourceVersion: version,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "egressd", "app.kubernetes.io/component": "webhook-certificate"}},
		Type: corev1.SecretTypeTLS,
		Data: data,
	}
}

// Create creates the Secret; false on 409 (it exists: another replica).
func (s *WebhookSecret) Create(ctx context.Context, data map[string][]byte) (bool, error) {
	code, err := s.api.do(ctx, http.MethodPost, s.path(false), "application/json", s.object(data, ""), nil, http.StatusConflict)
	return err == nil && code != http.StatusConflict, err
}

// Update replaces the Secret at version; false on 409 (changed since).
func (s *WebhookSecret) Update(ctx context.Context, data map[string][]byte, version string) (bool, error) {
	code, err := s.api.do(ctx, http.MethodPut, s.path(true), "application/json", s.object(data, version), nil, http.StatusConflict)
	return err == nil && code != http.StatusConflict, err
}

// PatchCABundle sets clientConfig.caBundle of every webhook of the
// configuration that does not hold bundle yet, each guarded by a test of
// its name (a configuration re-applied in between fails the patch instead
// of patching the wrong entry; the next sync retries).
func (w *WebhookConfig) PatchCABundle(ctx context.Context, bundle []byte) error {
	path := "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + url.PathEscape(w.name)
	var cfg struct {
		Webhooks []struct {
			Name         string `json:"name"`
			ClientConfig struct {
				CABundle []byte `json:"caBundle"`
			} `json:"clientConfig"`
		} `json:"webhooks"`
	}
	if _, err := w.api.do(ctx, http.MethodGet, path, "", nil, &cfg); err != nil {
		return err
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	var ops []op
	for i, wh := range cfg.Webhooks {
		if bytes.Equal(wh.ClientConfig.CABundle, bundle) {
			continue
		}
		ops = append(ops,
			op{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: wh.Name},
			op{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: base64.StdEncoding.EncodeToString(bundle)})
	}
	if len(ops) == 0 {
		return nil
	}
	_, err := w.api.do(ctx, http.MethodPatch, path, "application/json-patch+json", ops, nil)
	return err
}
