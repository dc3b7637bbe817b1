// Package proxy owns egressd's listeners and the one dialer behind them:
// HTTP CONNECT and absolute-form HTTP on the proxy listener, and the
// transparent SNI and Host listeners for clients without proxy support. It
// observes TLS handshakes in tunnels (it terminates TLS only where the
// deciding rule says inspect: true, handing the tunnel to inspect.Engine:
// inspect.go), revokes open connections a change no longer allows, and
// writes one audit record per request or tunnel (and one per exchange of
// an inspected tunnel).
//
// It imports admit (the admission pipeline), policy (decisions), identity,
// audit, record (the schema), inspect (the inspection engine),
// internal/http1 (the HTTP/1 server), internal/limit (connections per
// client), internal/metrics and resolver (the Answer type only). It must not
// import kube, cmd, dnsserver, certs (tests and benchmarks only) or
// client-go.
//
// Flow, one file per step: the HTTP listeners run on internal/http1's
// server (http.go implements its Handler: the connection budget, a record
// for every refused head, each head to CONNECT or a forwarded request)
// → identify and admit (admission.go: admit.Pipeline.Admit) → resolve,
// guard and dial exactly the checked addresses (dial.go:
// admit.Pipeline.Route, dialAddrs) → refuse (refusal.go) or relay: a
// tunnel (handler.go: serveConnect, Conn.Hijack; tunnel*.go: first
// message, TLS and Host checks, server flight) or a forwarded request
// (handler.go: serveRequest; forward.go) → one record (exchange.go).
// Revalidate (revoke.go) decides open ones again with
// admit.Pipeline.Redecide. docs/architecture.md, "Proxy request flow", has
// the steps in detail.
package proxy
