// Package resolver owns name resolution: the upstream DNS client, the one
// shared cache, and the DNS server pods use (--dns-addr).
//
// It imports policy, identity, audit and metrics; it must not import proxy,
// kube or cmd (dependencies point inward, DESIGN.md). The proxy calls
// Resolver.LookupIP; the CLI builds one Resolver, hands it to the proxy and
// to NewServer, and calls UpstreamsFromResolvConf / SearchFromResolvConf
// for the defaults.
//
// # Resolver and cache
//
// Query(name, type) answers from an LRU keyed by (name in lower case, type,
// class). An entry lives for the smallest TTL of its answer (all records
// handed out carry the remaining lifetime, as CoreDNS's cache does),
// clamped to [MinTTL, MaxTTL]; negative answers (NXDOMAIN, NODATA) live for
// min(SOA TTL, SOA MINIMUM) clamped to MaxNegativeTTL (RFC 2308 §5), and
// are not cached without a SOA. Concurrent identical misses share one
// upstream query. A miss asks the upstreams in order, starting with the one
// that answered last, over UDP with an EDNS0 buffer of 1232 bytes and again
// over TCP when the answer is truncated; SERVFAIL, REFUSED, timeouts and
// network errors move on to the next. When all fail, an entry expired less
// than StaleFor ago is served with TTL 30 and marked stale (RFC 8767), and
// the audit record says dns.stale. LookupIP asks A and AAAA concurrently,
// follows the CNAME chain (at most MaxCNAME links) and returns every
// address with the chain, the smallest TTL, the rcode, the time taken and
// whether it came from the cache.
//
// # Serving UDP and TCP
//
// TCP is miekg's server. UDP is udp.go's: a fixed set of reader goroutines
// per socket (2×GOMAXPROCS, at least 4), each taking every datagram waiting
// (up to 16) with one recvmmsg(2), answering them in turn and sending the
// answers with one sendmmsg(2), reusing its buffers and its query state.
// Before a query may wait on the network (a cache miss, the cluster DNS, a
// transparent lookup) its reader hands the socket and the rest of its
// batch to a parked or new reader, so cached answers never queue behind an
// upstream. A cache hit shares the entry's records, copied once a second
// as the TTL counts down, and the never-class stripping computed with
// them. Bound to a wildcard address, answers leave from the address the
// query was sent to (IP_PKTINFO / IPV6_PKTINFO), as with miekg's server.
//
// # A query's flow through the Server
//
//  1. Source IP → pod (identity.Source). Unknown or ambiguous: REFUSED with
//     EDE 18 (Prohibited), nothing else said, nothing asked upstream, in
//     every mode: never an open resolver. Over UDP (a source that may be
//     spoofed) the answer is never larger than the query: the EDE text,
//     then the EDE, then the OPT record and the question are dropped until
//     it fits, so egressd amplifies nothing.
//  2. Not a query, not exactly one question (RFC 9619), not class IN,
//     AXFR/IXFR, EDNS version > 0: NOTIMP, FORMERR, REFUSED, REFUSED,
//     BADVERS; reason bad-request.
//  3. Metadata names (policy.IsMetadataName): NXDOMAIN + EDE 15, reason
//     metadata, in every mode.
//  4. Search-list expansion (checked for names under the cluster domain and
//     for names the policy denies, so an allowed name costs one Decide):
//     the name is an allowed name plus one of the
//     pod's search domains ("<ns>.svc.<cluster domain>", "svc.<cluster
//     domain>", "<cluster domain>", then ServerConfig.SearchDomains, the
//     node's, e.g. "ec2.internal"). A stub resolver with ndots:5 asks
//     "api.example.com.llm-prod.svc.cluster.local" before
//     "api.example.com": expected traffic. It is answered NXDOMAIN here
//     (without EDE, nothing forwarded, so the stub moves on down its list)
//     and recorded verdict "allow", reason "search-expansion", with the
//     policy and rule that allow the name itself. An auditor filtering on
//     verdict "deny" sees real denials only. A denied name plus a node
//     search domain stays a denial (not-allowlisted).
//  5. Names under the cluster domain, and the PTR names of addresses in
//     ServerConfig.ClusterCIDRs (exactly four decimal labels under
//     in-addr.arpa, exactly 32 nibbles under ip6.arpa), go to ClusterDNS
//     uncached: verdict allow, reason cluster-domain. Without ClusterDNS
//     they are answered NXDOMAIN. Every other reverse name takes step 6:
//     the cluster DNS forwards what it does not own, so
//     "<secret>.113.0.203.in-addr.arpa" would otherwise carry data to
//     whoever runs 203.0.113.0/24's reverse zone.
//  6. Otherwise policy.Snapshot.Decide with Port 0 (does any rule of the
//     pod allow the name at all; the port is checked when the pod
//     connects), then Decision.InMode. Every type (A, AAAA, CNAME,
//     HTTPS/SVCB, TXT, ...) is decided by the name. Denied: NXDOMAIN with
//     EDE 15 (Blocked, RFC 8914 §4.16) and the text "egressd: <reason>" —
//     NXDOMAIN, not REFUSED, so stub resolvers keep walking their search
//     list. The EDE rides in the OPT record, so only clients that sent
//     EDNS0 get it (RFC 6891 §7). In audit mode a would-deny name is
//     forwarded and recorded allow with would_deny.
//  7. Allowed: ANY is answered with one synthesized HINFO "RFC8482"
//     (RFC 8482 §4.2), never forwarded. Other types are answered from the
//     shared cache. A and AAAA records in the guard's never class
//     (metadata, link-local, ...) are stripped from the answer; when that
//     leaves no address the name is denied NXDOMAIN + EDE 15 with the
//     class's reason, in every mode. Never-class addresses are also
//     removed from the authority section, from the ipv4hint/ipv6hint of
//     HTTPS and SVCB records, and from cluster DNS answers (step 5: anyone
//     who may create a headless Service's endpoints could otherwise point
//     a cluster name at 169.254.169.254). Private addresses stay: whether a
//     rule's cidrs open them is decided per connection by the proxy's
//     guard, and NetworkPolicy keeps pods from dialling them directly.
//  8. Transparent mode (AdvertiseIP set): an allowed A query is answered
//     with AdvertiseIP once LookupIP found an address for the name upstream
//     (NXDOMAIN and NODATA are passed on), TTL capped at AdvertiseTTL;
//     AAAA likewise with AdvertiseIP6, else empty NOERROR; HTTPS and SVCB
//     are answered NODATA because their address hints would lead past the
//     transparent listeners (RFC 9460 §3: clients then use A/AAAA).
//  9. The answer is bounded: over UDP to the client's EDNS0 size capped at
//     ServerConfig.UDPSize (1232), or 512 without EDNS0, truncated with TC
//     so the client retries over TCP; over TCP to 65535. A message that
//     does not parse gets FORMERR with the header and the questions that
//     parsed, as miekg's server answers it, but over UDP never larger than
//     the query (questions compressed in the query are dropped), and an
//     audit record with reason bad-request and no host; a message with QR
//     set, or shorter than a header, gets nothing.
//  10. One audit record (kind dns): client, host (the query name, lower
//     case, no trailing dot), qtype, verdict, would_deny, reason, policy,
//     rule, dns {answers, cnames, ttl, rcode, ms, cached, stale, upstream},
//     and error when the upstreams failed (SERVFAIL + EDE 23). Metrics:
//     egressd_dns_queries_total{verdict,rcode} and
//     egressd_requests_total{kind="dns",verdict,reason}.
package resolver
