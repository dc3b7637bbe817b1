// Package rollout runs egressd replicas behind a real Service dataplane and
// replaces, kills and reconfigures them under load (docs/operations.md,
// "Upgrades, drains and disruptions"; issue 18).
//
// The dataplane is Kubernetes' own: a real kube-apiserver and etcd
// (internal/k8stest), kube-controller-manager running only the EndpointSlice
// controller, and kube-proxy in iptables mode, all built from Go modules by
// scripts/k8s-test-env.sh. Network namespaces the test creates (names
// starting "egrro-") stand for a node and its pods: "egrro-node" holds
// kube-proxy's rules and a veth pair to each pod namespace, with addresses
// of 10.250.0.0/16 that exist only inside those namespaces; nothing is
// routed out of the node namespace (it has no default route and no link to
// the host). The control plane runs on the host's loopback; a forwarder the
// test opens inside the node namespace (10.250.255.1:6443) lets kube-proxy
// and egressd reach it.
//
// egressd replicas are processes in their pod namespaces (`ip netns
// exec`). The one stand-in is the readiness reporter: it plays the kubelet,
// polling each replica's /readyz and writing the Pod's Ready condition
// through the status subresource; the EndpointSlice controller and
// kube-proxy do the rest. Workload pods are namespaces too; their clients
// reach egressd through the Service's ClusterIP: dig, curl and glibc's
// resolver (getent, with the pod's resolv.conf that `ip netns exec`
// bind-mounts from /etc/netns) once at start, and the steady load from the
// test's own clients, whose sockets are opened inside the workload
// namespaces. The outside world (an upstream DNS server and a TLS origin)
// lives in namespace "egrro-world".
//
// TestRollingRestart replaces a replica the way a Deployment with
// maxUnavailable 0 does, with --lameduck and, as the control, without;
// TestAbruptLoss kills one with SIGKILL; TestTwoReplicasOneTruth relabels a
// pod and times the revocation on both replicas. Each prints its figures
// (docs/operations.md has them).
//
// The tests need root (network namespaces, iptables); CI runs as root.
// Namespaces left over from a crashed run are deleted by name at start.
//
// It has no non-test code and must not be imported.
package rollout
