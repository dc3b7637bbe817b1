// Package http1 is egressd's HTTP/1 server plumbing (RFC 9112): the strict
// request head reader, the request body reader, the response writer and
// the connection loop, behind a small Handler. It decides nothing and
// records nothing: the proxy (enforcement) implements Handler, and inspect
// screens the heads inside inspected tunnels with the same rules
// (CheckHead). It imports no package of this module.
//
// Flow of one connection (Server.Serve): accept → Handler.Open (the
// client's connection budget) → per request: ReadHead within
// HeaderTimeout (strict framing; refused or incomplete →
// Handler.Refused, so every head that began can be recorded) →
// Handler.Head: a CONNECT takes the connection over (Conn.Hijack, with
// the bytes read past the head); a plain request runs as a ServedRequest
// (Conn.Begin: body, 100 Continue, the watch for a client that leaves;
// ServedRequest.Finish: framing, keep-alive) → the next head after at most
// IdleTimeout. docs/architecture.md ("Measured choices on the request
// path") has why this is not net/http's server.
package http1
