// Package resolver owns name resolution: the upstream DNS client and the
// one shared cache. The proxy calls Resolver.LookupIP; the DNS server
// (package dnsserver) answers pods from a View's Cached and Resolver.Query
// and asks the cluster DNS with its own Client.
//
// It imports policy (for metadata names) and metrics; it must not import
// dnsserver, proxy, kube or cmd (dependencies point inward, docs/design.md), so
// that the proxy links the client and the cache, not the DNS server
// (internal/archtest holds that line). The CLI builds one Resolver and
// hands it to the proxy and to dnsserver.New, and calls
// UpstreamsFromResolvConf for the default upstreams.
//
// # Client
//
// Client.Exchange asks its servers in order, starting with the one that
// answered last, over UDP with an EDNS0 buffer of 1232 bytes and again over
// TCP when the answer is truncated; SERVFAIL, REFUSED, timeouts and network
// errors move on to the next. UDP sockets are connected, pooled and reused
// one query at a time for up to 10s (a socket per query cost more than the
// exchange), with a random ID per query; a late answer with another ID is
// skipped.
//
// Every answer is filtered before anyone sees it: only the records owned
// by the query name and its CNAME chain are kept, in chain order (an extra
// A record owned by another name is dropped: never cached, recorded,
// forwarded or dialled); the chain ends at a cloud metadata name
// (policy.IsMetadataName), whose records are dropped and which is never
// asked for; HTTPS and SVCB records lose their ech SvcParam, so that
// clients do not try Encrypted Client Hello (whose inner SNI the proxy
// cannot check); the authority section keeps no address and the
// additional section nothing.
//
// # Resolver and cache
//
// Query(name, type) answers from an LRU keyed by (name in lower case, type,
// class). An entry lives for the smallest TTL of its answer (all records
// handed out carry the remaining lifetime, as CoreDNS's cache does),
// clamped to [MinTTL, MaxTTL]; negative answers (NXDOMAIN, NODATA) live for
// min(SOA TTL, SOA MINIMUM) clamped to MaxNegativeTTL (RFC 2308 §5), and
// are not cached without a SOA; TTL 0 is not cached. Concurrent identical
// misses share one upstream query (golang.org/x/sync/singleflight), run
// in its own goroutine so that a caller whose context ends returns at
// once. WithBeforeWait lets a caller run
// something once its question has left and before it waits (the DNS
// server hands its UDP socket on). When all upstreams fail, an entry
// expired less than StaleFor ago is served with TTL 30 and marked stale
// (RFC 8767). A failure is remembered for FailureTTL (1s, RFC 9520): a
// query for the same (name, type) inside that window gets the stale entry
// or the failure without a packet upstream, so that a failing upstream is
// not asked again by every retrying client, and a question it always
// refuses (AAAA on some servers) costs one exchange a window, not one per
// connection. View.Cached is a fresh hit only, sharing the entry's records
// (copied once a second as the TTL counts down) and what the View's
// function made of them in that second, typed (View[V]).
//
// LookupIP asks A and AAAA concurrently (one after the other, without a
// goroutine, when AAAA is answered without an upstream), follows the CNAME chain (at most
// MaxCNAME links) and returns every address with the chain, the smallest
// TTL, the rcode, the time taken and whether it came from the cache. A
// chain that leads to a metadata name fails with ErrMetadataName and no
// address: the caller denies it with reason metadata.
package resolver
