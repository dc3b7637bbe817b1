// Package inspect is egressd's TLS inspection (docs/design.md "Inspection",
// docs/inspection.md): one short-lived leaf per host name, signed on first
// use by the inspection CA through certs (the one CA loader and issuer)
// and cached (Leaves: the cache, single flight and renewal), and the engine
// that terminates an inspected tunnel's TLS, opens a verified TLS
// connection to the origin over the connection the proxy already dialled,
// and relays HTTP/1.1 and HTTP/2 request by request, asking a callback for
// each request's decision and handing each exchange to a record callback.
//
// It owns no policy and no dialling: the proxy decides the tunnel, dials
// the guard-checked address and hands both connections over; the engine
// never resolves or dials a name. It imports no other package of this
// module but certs and internal/http1 (the head rules), logs nothing and
// keeps no global state.
//
// Request flow of one inspected tunnel (Serve, generic in the caller's
// decision type: Decide returns it in the Verdict and Record gets it back
// typed, so nothing crosses into proxy as an any):
//
//	client TLS ClientHello → SNI must be the tunnel host, no ECH
//	→ upstream TLS over the given connection: SNI the host, ALPN the
//	  client's offer ∩ {h2, http/1.1}, full verification (system roots
//	  plus --upstream-ca); a failure ends the tunnel (upstream-tls-failed)
//	  before the client's handshake completes
//	→ client handshake with the host's leaf, ALPN the origin's choice;
//	  Args.Established (for the tunnel's interim records)
//	→ per request: the proxy's limits (limits.go: head or header list
//	  size 431, head time 408, HTTP/2 concurrent streams), strict head
//	  (HTTP/1.1), no CONNECT or Upgrade (refuse.go: 501 bad-request,
//	  before any decision), Host/:authority is the tunnel host (an
//	  absolute-form request's Host field too), Decide → 403 with
//	  X-Egressd-Reason, or forwarded (response header time 504, a
//	  response head over Config.MaxResponseHeadBytes 502, a silent
//	  response cut at the idle timeout); Args.Requests counted; Record
//	  (method, status, proto, bytes, redirect host; never bodies,
//	  credentials or query strings).
//
// The CA key stays inside certs.CA; nothing of this package reads it, and
// no error or record of it holds it.
package inspect
