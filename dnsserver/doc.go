// Package dnsserver is the DNS server pods use (--dns-addr): it identifies
// the pod behind each query, routes the name (policy, cluster DNS, search
// expansion), strips what a pod must not learn from the answer, and writes
// one audit record per query. Answers come from the shared cache of
// package resolver.
//
// It imports resolver, policy, identity, audit, limit and metrics; it
// must not import proxy, kube or cmd, and nothing but cmd imports it (the
// proxy links resolver only).
//
// # Serving UDP and TCP
//
// TCP is miekg's server behind a listener that caps the connections of
// each source IP (Config.MaxConnsPerClient, the proxy's
// --max-conns-per-client): one over it is closed at accept and counted in
// a summary record (reason rate-limited, count). UDP is udp.go's:
// a fixed set of readers per socket (GOMAXPROCS, at least 2), one of which
// reads at a time (it holds the read token and keeps it while it answers a
// small batch, so an idle server wakes no second thread), taking every
// datagram waiting (up to 32) with one recvmmsg(2), answering them in turn
// and sending the answers with one sendmmsg(2), reusing its buffers and
// its query state. A query that must wait on the network (a cache miss,
// the cluster DNS, a transparent lookup) hands its reader, with the rest of
// the batch, to a parked goroutine once its question has left for the
// upstream (resolver.WithBeforeWait), so cached answers never queue behind
// an upstream; it then answers alone and is recorded after its answer is
// sent. A cache hit shares the entry's records, copied once a second as
// the TTL counts down, and the never-class stripping and record texts
// computed with them. Bound to a wildcard address, answers leave from the
// address the query was sent to (IP_PKTINFO / IPV6_PKTINFO), as with
// miekg's server. BenchmarkUDPServer compares it with miekg's UDP server.
//
// A cache miss waits as long as the Resolver bounds it (two tries per
// upstream); Config.QueryTimeout bounds cluster DNS and transparent
// lookups.
//
// # A query's flow through the Server
//
//  0. Rate: a source IP over Config.QueryRate (--dns-rate, burst
//     --dns-burst) is answered REFUSED, never larger than the query, known
//     pod or not; such queries get no record each but one summary record
//     per client and second (reason rate-limited, count).
//  1. Source IP → pod (identity.Source). Unknown or ambiguous: REFUSED with
//     EDE 18 (Prohibited), nothing else said, nothing asked upstream, in
//     every mode: never an open resolver. Over UDP (a source that may be
//     spoofed) the answer is never larger than the query: the EDE text,
//     then the EDE, then the OPT record and the question are dropped until
//     it fits, so egressd amplifies nothing. A query carrying the EDNS0
//     option 65431 (ProbeOption) is recorded with its data as probe
//     (sanitized, at most 64 bytes); it changes no decision.
//  2. Audit: while Config.AuditAvailable reports false (--audit-failure
//     closed), REFUSED with reason audit-unavailable, still recorded.
//  3. Not a query, not exactly one question (RFC 9619), not class IN,
//     AXFR/IXFR, EDNS version > 0: NOTIMP, FORMERR, REFUSED, REFUSED,
//     BADVERS; reason bad-request.
//  4. Metadata names (policy.IsMetadataName): NXDOMAIN + EDE 15, reason
//     metadata, in every mode.
//  5. Search-list expansion (checked for names under the cluster domain and
//     for names the policy denies, so an allowed name costs one Decide):
//     the name is an allowed name plus one of the pod's search domains
//     ("<ns>.svc.<cluster domain>", "svc.<cluster domain>", "<cluster
//     domain>", then Config.SearchDomains, the node's, e.g.
//     "ec2.internal"). A stub resolver with ndots:5 asks
//     "api.example.com.llm-prod.svc.cluster.local" before
//     "api.example.com": expected traffic. It is answered NXDOMAIN here
//     (without EDE, nothing forwarded, so the stub moves on down its list)
//     and recorded with the decision for the name itself, reason
//     search-expansion (Decision.Because). An auditor filtering on verdict
//     "deny" sees real denials only. A denied name plus a node search
//     domain stays a denial (not-allowlisted).
//  6. Names under the cluster domain, and the PTR names of addresses in
//     Config.ClusterCIDRs (exactly four decimal labels under in-addr.arpa,
//     exactly 32 nibbles under ip6.arpa), go to ClusterDNS uncached:
//     policy.AllowedBecause(cluster-domain), no rule deciding. Without
//     ClusterDNS they are answered NXDOMAIN. Every other reverse name takes
//     step 7: the cluster DNS forwards what it does not own, so
//     "<secret>.113.0.203.in-addr.arpa" would otherwise carry data to
//     whoever runs 203.0.113.0/24's reverse zone.
//  7. Otherwise policy.Snapshot.Decide with Port 0 (does any rule of the
//     pod allow the name at all; the port is checked when the pod
//     connects) and the instance's Mode (Decide applies a policy's own
//     spec.mode). Every type (A, AAAA, CNAME, HTTPS/SVCB, TXT, ...) is
//     decided by the name. Denied: NXDOMAIN with EDE 15 (Blocked, RFC 8914
//     §4.16) and the text "egressd: <reason>" — NXDOMAIN, not REFUSED, so
//     stub resolvers keep walking their search list. The EDE rides in the
//     OPT record, so only clients that sent EDNS0 get it (RFC 6891 §7). In
//     audit mode a would-deny name is forwarded and recorded allow with
//     would_deny.
//  8. Allowed: ANY is answered with one synthesized HINFO "RFC8482"
//     (RFC 8482 §4.2), never forwarded. Other types are answered from the
//     shared cache, whose answers hold only the records of the name and
//     its CNAME chain and no ech SvcParam (resolver.Client). A chain that
//     leads to a metadata name is denied NXDOMAIN + EDE 15, reason
//     metadata, whatever the type (Decision.Deny, in every mode). A and
//     AAAA records in the guard's never class (metadata, link-local, ...)
//     are stripped from the answer; when that leaves no address the name
//     is denied the same way with the class's reason. Never-class
//     addresses are also removed from the authority section, from the
//     ipv4hint/ipv6hint of HTTPS and SVCB records, and from cluster DNS
//     answers (step 6: anyone who may create a headless Service's
//     endpoints could otherwise point a cluster name at 169.254.169.254).
//     Private addresses stay: whether a rule's cidrs open them is decided
//     per connection by the proxy's guard, and NetworkPolicy keeps pods
//     from dialling them directly.
//  9. Transparent mode (AdvertiseIP set): an allowed A query is answered
//     with AdvertiseIP once LookupIP found an address for the name upstream
//     (NXDOMAIN and NODATA are passed on), TTL capped at AdvertiseTTL;
//     AAAA likewise with AdvertiseIP6, else empty NOERROR; HTTPS and SVCB
//     are answered NODATA because their address hints would lead past the
//     transparent listeners (RFC 9460 §3: clients then use A/AAAA).
//  10. The answer is bounded: over UDP to the client's EDNS0 size capped at
//     Config.UDPSize (1232), or 512 without EDNS0, truncated with TC so
//     the client retries over TCP; over TCP to 65535. A message that does
//     not parse gets FORMERR with the header and the questions that
//     parsed, as miekg's server answers it, but over UDP never larger than
//     the query (questions compressed in the query are dropped), and an
//     audit record with reason bad-request and no host; a message with QR
//     set, or shorter than a header, gets nothing.
//  11. One audit record (kind dns): client, host (the query name, lower
//     case, no trailing dot), qtype, verdict, would_deny, reason, policy,
//     rule (the decision, never edited here), outcome (ok when answered,
//     NXDOMAIN and search expansions included; refused for a denial;
//     resolve-failed when the upstreams failed and no stale answer was
//     left: SERVFAIL + EDE 23, and error), probe, dns {answers, cnames,
//     ttl, rcode, ms, cached, stale, upstream}. Metrics:
//     egressd_dns_queries_total{verdict,rcode} and
//     egressd_requests_total{kind="dns",verdict,reason}.
package dnsserver
