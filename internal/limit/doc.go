// Package limit owns the per-client limits of every listener: the open
// connection cap (proxy, transparent and DNS-over-TCP listeners), the DNS
// query rate, and the summary of refusals over a limit (one audit record
// per client, kind and second with a count, so that one pod cannot flood
// the audit log by being refused).
//
// It imports only the standard library and golang.org/x/time/rate (the
// token bucket); callers turn a summary into their own audit record. It must not import proxy, resolver or cmd.
package limit
