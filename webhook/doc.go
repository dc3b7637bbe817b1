// Package webhook serves egressd's mutating admission webhook
// (docs/design.md, "Injection"): POST /inject, AdmissionReview v1, over TLS
// with the certificate pair of a directory (tls.crt, tls.key), reloaded
// when the files change.
//
// Flow: API server → TLS (GetCertificate: the pair last read from the
// directory) → handler: POST, JSON, bounded body → decode the review (400
// and a log line when malformed) → only Pod CREATEs of Config.Namespace →
// inject.Mutate → an allowing response, with the patch (JSONPatch) or
// without one. The handler never refuses a pod: the egress boundary is the
// NetworkPolicy, and a pod that misses injection fails closed (it cannot
// get out), so the webhook is registered with failurePolicy Ignore.
//
// CertManager (certmanager.go) makes the certificate when no cert-manager
// does: a CA and a serving certificate (certs) kept in a Secret of the
// namespace (first writer wins, the other replicas adopt it), written to
// the directory, the CA patched into the MutatingWebhookConfiguration's
// caBundle, renewed before expiry. Kubernetes is reached only through the
// SecretStore and CABundlePatcher interfaces; kube implements them.
//
// It may import inject, certs, internal/watch and the API types; it must
// not import client-go, kube, proxy, resolver or cmd.
package webhook
