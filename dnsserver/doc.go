// Package dnsserver is the DNS server pods use (--dns-addr): it identifies
// the pod behind each query, routes the name (policy, cluster DNS, search
// expansion), strips what a pod must not learn from the answer, and writes
// one audit record per query. Answers come from the shared cache of
// package resolver.
//
// Flow of a query: rate limit → admit.Pipeline.Identify (unknown:
// REFUSED) → admit.Pipeline.Admit with AnyPort, the steps of a CONNECT
// (audit availability; then, on the name: metadata names, search-list
// expansion, cluster domain and cluster PTR names to the cluster DNS,
// policy.Snapshot.Decide) → message checks → the route Admit chose
// (denied: NXDOMAIN + EDE 15) → the answer from
// the cache, never-class addresses stripped (transparent mode: the
// advertised address) → size bound (TC over UDP) → one record (kind dns).
// TCP is miekg's server behind a per-client connection cap; UDP is
// udp.go's batch readers (recvmmsg/sendmmsg). docs/architecture.md ("DNS
// server") explains each step and the UDP design.
//
// It imports admit, resolver, policy, audit, record, limit and
// metrics; it must not import proxy, kube or cmd, and nothing but cmd
// imports it (the proxy links resolver only).
package dnsserver
