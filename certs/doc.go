// Package certs is egressd's one CA loader and one certificate issuer.
//
// LoadCA (LoadCAFiles) takes a PEM CA certificate and key of any signing
// type (ECDSA, RSA, Ed25519) and refuses a key that is not the
// certificate's, a certificate without CA:TRUE or keyCertSign, and one
// outside its validity; IssueWith signs ECDSA P-256 leaves with it for
// the names, lifetime, backdate, clock and entropy its caller gives.
// NewCA and NewCAWith make an ECDSA P-256 root.
//
// Its users: the admission webhook's self-managed root and serving
// certificate (webhook), TLS inspection's leaves (inspect caches what
// IssueWith signs; its cache, single flight and renewal stay there), and
// tests, benchmarks and demos (NewCA, Issue: 10-day certificates). The
// proxy itself never imports it: it reaches a CA only through inspect.
// It must not import any other package of this module.
package certs
