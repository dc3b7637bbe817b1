// Package identity maps a connection's source IP to the pod behind it
// (DESIGN.md, "Identity"): the Pod whose status.podIPs holds the address, in
// Running or Pending phase, not hostNetwork. An address no live pod holds, or
// one that two live pods claim, gives no identity: the caller denies with
// reason unknown-client.
//
// Store is the index every source feeds: the static pods file (ParsePods,
// reloaded on change by the CLI) and, in a cluster, the pod informer of
// package kube. The proxy and the resolver see only the Source interface.
//
// identity imports policy (for Client) and Kubernetes API types; it must not
// import client-go, proxy, resolver, kube or cmd.
package identity
