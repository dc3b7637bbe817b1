// Package explain says what `egressd run` decides for one request and why
// (docs/explain.md): the identity, every policy of the namespace and
// whether it selects the pod, the rules that name the host, the guard's
// class of each address (with a lookup, or for an IP literal) and the
// request inside an inspected tunnel. It decides through run's own
// admission pipeline (package admit): what it prints is what run does, not
// a second implementation. cmd/egressd parses the flags and reads the
// policies and pods (files or the Kubernetes API).
//
// explain imports admit, identity, policy, resolver (the lookup of
// --resolve) and internal/metrics; it must not import proxy, dnsserver,
// audit, kube or cmd.
package explain
