// Package admit is egressd's admission pipeline, written once and called by
// every entry: the proxy's CONNECT, absolute-form HTTP, SNI and Host
// listeners, the DNS server, revocation's re-decision, and `egressd
// explain`. explain links
// it so that what it prints is what run does, not a second implementation.
//
// Steps, in order (docs/architecture.md, "Proxy request flow"):
//
//	Identify  source IP → pod (identity.Source); unknown → unknown-client
//	Admit     audit availability (audit-unavailable), NormalizeHost
//	          (invalid-host), the port, then Snapshot.Decide; a DNS
//	          question (AnyPort) on the name as asked (name.go): metadata
//	          names, the cluster domain and its PTR names, Decide on
//	          port 0, search-list expansions; AllNever on its answer
//	Resolve   an IP literal is not looked up; a name once through the
//	          Lookuper (a CNAME to a metadata name → metadata)
//	Check     policy.Guard.CheckAll over every candidate address
//	Route     Resolve then Check: the decision and exactly the addresses
//	          the caller may dial
//	Redecide  revocation: Identify, Decide on a snapshot, the guard step
//	          (Guard.AppendCheckAll: CheckAll's loop into a buffer on the
//	          stack) on the dialled address
//
// The caller dials exactly Route's addresses (no second resolution) and
// maps reasons to its own answers (HTTP status, DNS rcode). Decisions are
// values: every step returns a new one made by policy's functions.
//
// admit is an adapter between the pure core and the servers: it imports
// policy, identity (the Source interface) and resolver (Answer and its
// errors; lookups go through the Lookuper interface). It does no I/O of its
// own, logs nothing and must not import proxy, dnsserver, audit, kube or
// cmd (nor explain, which calls it).
package admit
