// Package certs owns a small certificate authority for tests, benchmarks and
// local demos: a self-signed ECDSA P-256 root and leaf certificates for host
// names and IP addresses signed by it.
//
// egressd itself never terminates TLS (it observes handshakes, it does not
// intercept them), so nothing in the serving path imports this package. It
// must not import any other package of this module.
package certs
