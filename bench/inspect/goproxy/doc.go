// Command goproxy-inspect is bench/inspect's third peer: an inspecting
// (MITM) CONNECT proxy built on github.com/elazarl/goproxy, for an A/B of
// the plumbing's cost on the inspection path against egressd's own engine
// (docs/inspection.md, "goproxy"). It is a measuring instrument in its own
// Go module, so neither egressd's module nor its binary gains goproxy.
//
// It does the work the bench's egressd policy asks for, as far as goproxy
// lets a caller do it:
//
//   - CONNECT is accepted only to the -allow targets (host:port), others get
//     403 before any dial;
//   - an accepted tunnel is MITMed (goproxy's ConnectMitm) with leaves from
//     -ca-cert/-ca-key signed by goproxy's TLSConfigFromCA, cached per host
//     (a CertStorage, as egressd's and squid's leaf caches);
//   - every request inside it must name the tunnel's host in Host (and its
//     port, if it gives one), else 403;
//   - requests go upstream through one http.Transport per tunnel (so a
//     tunnel has its own origin connection, as egressd's and squid's do),
//     always to the tunnel's host and port (goproxy would route by Host),
//     with a dial that resolves the name, refuses any address outside
//     -cidr and dials the address it checked; the origin is verified
//     against -upstream-ca only.
//
// What it does not do that egressd does: it writes no records (no tunnel
// record, no per-request record), it presents its leaf before it has seen
// the origin (the origin is dialled at the first request; a failed
// verification closes an HTTP/1.1 tunnel without a response, or is a 502
// on an h2 stream), and its decisions are not
// egressd's pipeline (method and path rules, audit mode, revocation).
// -h2 (on by default) is goproxy's AllowHTTP2: h2 to a client that offers
// it; the tunnel's transport offers the origin the protocol the client
// speaks, as egressd does.
package main
