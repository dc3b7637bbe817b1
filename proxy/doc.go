// Package proxy owns egressd's listeners and the one guarded dialer behind
// them: HTTP CONNECT and absolute-form HTTP on the proxy listener, and the
// transparent SNI and Host listeners for clients without proxy support. It
// observes TLS handshakes in tunnels (it never terminates TLS) and writes one
// audit record per request or tunnel.
//
// It imports policy (decisions, guard), identity (source IP → pod), audit,
// metrics and resolver (the Answer type only; lookups go through the
// Lookuper interface). It must not import kube, cmd or certs (certs is for
// tests and benchmarks).
//
// Request flow, the same for CONNECT, HTTP and SNI:
//
//  0. accept: a source IP holding Config.MaxConnsPerClient connections
//     (all listeners together; default 1024) gets no more: 429 with
//     X-Egressd-Reason rate-limited on the HTTP listeners, a plain close on
//     the SNI listener; refusals are counted in one summary record per
//     client, kind and second (reason rate-limited, count).
//     head (proxy and Host listeners): egressd's own reader (head.go), not
//     net/http's server: at most MaxHeaderBytes (431), complete within
//     HeaderTimeout (408), strict framing (400, 501, 505); every head that
//     began gets a record, refused or incomplete, with the method and host
//     it named. A CONNECT then runs without net/http at all; plain HTTP
//     requests go through httputil.ReverseProxy with egressd's framing
//     (response.go).
//  1. identity: identify, the one source IP → pod step; unknown → 403
//     unknown-client (every mode). While Config.AuditAvailable says false:
//     503 audit-unavailable.
//  2. host: policy.NormalizeHost; invalid → 400 invalid-host.
//  3. decide: Snapshot.Decide with the instance's mode — metadata names
//     first (403 metadata, every mode, before any lookup); denied → 403 with
//     X-Egressd-Reason and a one-line body naming host, pod and reason
//     (never 407). In audit mode a denial other than the never class passes
//     with would_deny. A CONNECT target given as an absolute URI is decided
//     on the host it names and then refused as a bad request.
//  4. resolve: an IP literal is not looked up; a name goes through the
//     Lookuper once (the record shows its answer); failure → 502, outcome
//     resolve-failed.
//  5. guard: every candidate address through Guard.Check; refused ones are
//     skipped; none left → 403 with the guard's reason (never class in every
//     mode, private-address softened in audit mode).
//  6. dial exactly the permitted ip:port (zone dropped, IPv4-mapped as
//     IPv4: what the guard classified), in order, falling through on
//     failure; no second resolution. All failed → 502 dial-failed (504
//     dial-timeout when a connect timed out). A failure keeps the decision
//     (verdict allow, reason allowed, the rule): what went wrong is the
//     record's outcome, and X-Egressd-Reason names it.
//  7. relay:
//     - CONNECT: 200, then the client's first message is read (the first
//     byte may wait up to IdleTimeout, the rest PeekTimeout). A ClientHello
//     (at most 32 KiB, reassembled across records, read with cryptobyte):
//     an SNI that differs from the CONNECT host closes the tunnel
//     (sni-mismatch), so does the encrypted_client_hello extension (ech,
//     tls.ech) unless the deciding rule says ech: allow; a TLS record other
//     than a handshake first (an alert or ChangeCipherSpec some servers
//     skip) refuses it (bad-request). A plaintext HTTP request head (at
//     most MaxHeaderBytes): every Host field and an absolute-form target
//     must name the CONNECT host, with no port or the CONNECT port
//     (host-mismatch); a head that does not parse is bad-request. Other
//     bytes (SSH, ...) pass as tls.result not-tls. These refusals go
//     through Decision.Deny: audit mode relays with would_deny. The
//     server's first flight gives version, cipher, ALPN (TLS 1.2 only: in
//     1.3 the selected ALPN is encrypted) or a plaintext alert. Then both
//     directions are relayed with half-close, until EOF, error,
//     IdleTimeout without a byte either way, revocation or the drain
//     deadline.
//     - SNI listener: the ClientHello is read first (PeekTimeout, 32 KiB);
//     no SNI → no-sni; the SNI and the listener's port are decided as
//     above, ech is checked before any dial, the hello is replayed and the
//     bytes relayed.
//     - HTTP (absolute-form, or Host on the transparent listener): each
//     request is decided anew (the URL decides in absolute form, never the
//     Host field), forwarded with Host set to the decided name and port,
//     hop-by-hop, Proxy-*, Expect and Egressd-Probe fields removed and no
//     X-Forwarded-*, over a fresh guarded connection (no upstream
//     keep-alive: a pooled connection was checked for another request's
//     decision). https:// in absolute form is refused (400): use CONNECT.
//     Upgrade is refused on this path. An origin that fails before its
//     answer gives 502 (504 at ResponseHeaderTimeout), outcome
//     upstream-error; one that fails inside its body, or whose body moves
//     nothing for IdleTimeout, has its response cut (never completed) and
//     outcome upstream-error or idle-timeout.
//  8. audit: one record when the request or tunnel ends: decision, outcome,
//     dns, peer, tls, http (method, status, redirect host; the path only
//     with AuditHTTPPath full), probe (Egressd-Probe), bytes, duration,
//     redacted error. A tunnel's outcome: ok, idle-timeout, drained,
//     upstream-error when the upstream closed before any server hello,
//     revoked, refused. Its id and start are set at admission; plain HTTP
//     requests and tunnels are registered with Config.Interim while they
//     run.
//
// Revalidate (revoke.go), called after every policy or identity change,
// decides every open tunnel and forwarded request again in a goroutine of
// its own (identify, Decide, the guard on the dialled address, the TLS or
// Host check): those no longer allowed are reset within a second, their
// record carries the new decision and outcome revoked; in audit mode they
// stay open and the record says would_deny.
//
// Shutdown stops the listeners, lets tunnels and requests end until its
// context ends, then cuts the rest (closing connections and cancelling
// upstream requests); every tunnel's and request's record is written before
// it returns.
package proxy
