package resolver

import "errors"

// Sentinel errors of LookupIP and Query, matched with errors.Is. Every error
// the package returns wraps one of them or a context error.
var (
	// ErrNXDomain: the name does not exist (RCODE 3, RFC 1035 §4.1.1).
	ErrNXDomain = errors.New("resolver: no such host")
	// ErrNoAddress: the name exists but has no A or AAAA record at the end
	// of its CNAME chain (NODATA, RFC 2308 §2.2).
	ErrNoAddress = errors.New("resolver: no address for host")
	// ErrUpstream: every upstream failed (timeout, network error, SERVFAIL,
	// REFUSED, malformed answer) and no stale answer was left to serve.
	ErrUpstream = errors.New("resolver: upstream failed")
	// ErrCNAMEChain: the CNAME chain is longer than Config.MaxCNAME or loops.
	ErrCNAMEChain = errors.New("resolver: cname chain too long")
	// ErrMetadataName: the CNAME chain leads to a cloud metadata name
	// (policy.IsMetadataName), which is never looked up: deny it as the
	// name itself would be (reason metadata).
	ErrMetadataName = errors.New("resolver: cname to a metadata name")
	// ErrInvalidName: the name is empty, too long or not a domain name.
	ErrInvalidName = errors.New("resolver: invalid name")
)
