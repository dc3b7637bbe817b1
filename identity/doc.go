// Package identity maps a connection's source IP to the pod behind it
// (docs/design.md, "Identity"): the Pod whose status.podIPs holds the address, in
// Running or Pending phase, not hostNetwork. An address no live pod holds, or
// one that two live pods claim, gives no identity: the caller denies with
// reason unknown-client.
//
// The identity (ClientFor) is what a decision and a record need: namespace,
// pod name, service account, labels, the pod's UID, its workload
// (WorkloadOf: the controller ownerReference, a ReplicaSet resolved to its
// Deployment by the pod-template-hash naming convention, a pod without a
// controller as itself) and whether its Initialized condition is True
// (rules with phase: init match only before).
//
// Store is the index every source feeds: the static pods file (ParsePods,
// reloaded on change by the CLI) and, in a cluster, the pod informer of
// package kube. Both go through Store.Replace. The proxy and the resolver
// see only the Source interface.
//
// Change notification: a decision made for an open connection holds only as
// long as the identity it was made for. Every Replace that changes the
// index in anything a lookup returns (pod added or removed, IP reused or
// become ambiguous, labels, service account, UID, workload, Initialized)
// advances Store.Generation and calls each function registered with
// Store.Subscribe, after the new index is in force and in the goroutine
// that called Replace. A consumer (revocation of open tunnels) wakes its own
// goroutine from there and decides its connections again through Lookup;
// Replaces that change nothing (informer resyncs, status updates egressd
// does not read, an unchanged pods file) notify nobody.
//
// identity imports policy (for Client) and Kubernetes API types; it must not
// import client-go, proxy, resolver, kube or cmd.
package identity
