// Package webhook_test runs egressd's injection webhook against a real
// kube-apiserver (internal/k8stest): the webhook registered with a
// MutatingWebhookConfiguration whose url is https://127.0.0.1:PORT/inject,
// its certificate self-managed through a Secret and the configuration's
// caBundle (kube's REST clients, as a ServiceAccount bound to exactly the
// chart's rules), called by the API server over TLS on loopback.
package webhook_test
