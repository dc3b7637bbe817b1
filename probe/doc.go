// Package probe owns `egressd probe`: checks run against a running egressd
// from inside a pod, to prove after a rollout that what should pass passes
// and what must stay closed stays closed (docs/design.md, "Reports and
// verification").
//
// A check names a host and port and what egressd should decide (file.go).
// Each check runs as one or more steps (probe.go):
//
//   - proxy: a CONNECT host:port through egressd's proxy, carrying
//     "Egressd-Probe: NAME" (connect.go). 200 is allowed; 403 (or 400) with
//     X-Egressd-Reason is denied with that reason; 502/504 are allowed by
//     policy with the upstream failing. The tunnel is closed at once: a
//     probe proves the decision, not the destination. A check with a path
//     first sends one request inside the tunnel, trusting egressd's
//     inspection CA (inspect.go): a 403 with method-not-allowed,
//     path-not-allowed or host-mismatch is egressd's denial, any other
//     answer the origin's, so allowed.
//   - dns: an A query to egressd's resolver carrying the EDNS0 local option
//     EDNSOptionCode with the name (dns.go). NOERROR is allowed; NXDOMAIN
//     with Extended DNS Error 15 (Blocked) is denied, the reason read from
//     the EDE text "egressd: <reason>".
//   - direct: a plain TCP connect to an address without the proxy (direct.go),
//     which must fail: the NetworkPolicy keeps egressd the only way out.
//
// The permanent negative controls (controls.go) run every time: the
// metadata address by IP, every metadata name, a link-local address and a
// host outside every rule; egressd must refuse each before any dial.
// Results are judged (result.go) and written as a table or JUnit XML
// (report.go).
//
// The markers change no decision of egressd: they only let records, alerts
// and reports tell probes apart. This package is a client: it imports
// policy (host names, the reason strings) and miekg/dns; it must not import
// proxy, resolver, kube, audit or cmd.
package probe
