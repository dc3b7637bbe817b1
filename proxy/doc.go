// Package proxy owns egressd's listeners and the one dialer behind them:
// HTTP CONNECT and absolute-form HTTP on the proxy listener, and the
// transparent SNI and Host listeners for clients without proxy support. It
// observes TLS handshakes in tunnels (it terminates TLS only where the
// deciding rule says inspect: true, handing the tunnel to inspect.Engine:
// inspect.go), revokes open connections a change no longer allows, and
// writes one audit record per request or tunnel (and one per exchange of
// an inspected tunnel).
//
// It imports admit (the admission pipeline and its Inputs, in Config),
// policy (decisions), record (the audit record's schema), audit (the
// writer, ids, redaction), inspect (the inspection engine), internal/http1
// (the HTTP/1 server), internal/limit (MaxConnsPerClient and its summary
// records), internal/metrics and resolver (the Answer type and its rcode
// names); its own internal/sniff parses first messages. It must not import
// kube, cmd, dnsserver, certs (tests and benchmarks only) or client-go.
//
// Flow, one file per step: the HTTP listeners run on internal/http1's
// server (http.go implements its Handler: the connection budget, a record
// for every refused head, each head to CONNECT or a forwarded request)
// → identify and admit (admission.go: admit.Pipeline.Admit) → resolve,
// guard and dial exactly the checked addresses (dial.go: routeAndDial,
// admit.Pipeline.Route then dialAddrs) → refuse (refusal.go) or relay: a
// tunnel (handler.go: serveConnect, Conn.Hijack; tunnel*.go: first
// message, TLS and Host checks, server flight) or a forwarded request
// (handler.go: serveRequest; forward.go) → one record (exchange.go:
// finish, its outcome by record.OutcomeOf).
// Revalidate (revoke.go) decides open ones again with
// admit.Pipeline.Redecide and folds the result in (exchange.revoke).
// docs/architecture.md, "Proxy request flow", has the steps in detail.
package proxy
