// Package certs owns a small certificate authority: a self-signed ECDSA
// P-256 root and leaf certificates for host names and IP addresses signed
// by it. NewCA and Issue make 10-day certificates for tests, benchmarks and
// local demos; NewCAWith, IssueWith, LoadCA and EncodePair serve the
// admission webhook's self-managed serving certificate (webhook), with the
// lifetimes and the clock its caller gives.
//
// egressd's proxy never terminates TLS with it (it observes handshakes),
// so only the webhook and its wiring may import this package in serving
// code. It must not import any other package of this module.
package certs
