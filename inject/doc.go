// Package inject computes the mutation egressd's admission webhook makes to a
// Pod (docs/design.md, "Injection"): the proxy environment of every container
// and init container, optionally the pod's DNS settings, and the
// egressd.dev/injected annotation, as an RFC 6902 JSON patch.
//
// Flow: Mutate(pod, namespace, Config) → skip (opted out, host network) or,
// per container, the six proxy variables it lacks (or all of them with
// egressd.dev/inject-override) → the dnsConfig with inject.dns → the mark →
// a patch, empty when the pod already is what injection makes it
// (idempotent: a re-invoked or repeated admission changes nothing).
//
// It is pure like policy: data in, a patch out; no I/O, no clock, no
// logging. It imports the Pod API types, x/net's publicsuffix and the
// standard library only; never client-go or another package of this module.
package inject
