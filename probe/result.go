package probe

import (
	"fmt"
	"time"
)

// Via is how a step reached egressd.
type Via string

// Steps of a check.
const (
	ViaProxy  Via = "proxy"  // CONNECT through egressd's proxy
	ViaDNS    Via = "dns"    // A query to egressd's resolver
	ViaDirect Via = "direct" // TCP connect without the proxy
)

// Observed is what a step saw, in terms of egressd's decision.
type Observed string

// Observations.
const (
	// Allowed: CONNECT answered 200, or DNS NOERROR.
	Allowed Observed = "allowed"
	// UpstreamFailed: the policy allowed, then the destination failed:
	// CONNECT 502/504, DNS SERVFAIL, or an NXDOMAIN that egressd did not
	// mark as blocked (the name does not exist upstream).
	UpstreamFailed Observed = "upstream-failed"
	// Denied: egressd refused, with a reason: CONNECT 403 (or 400) with
	// X-Egressd-Reason, DNS NXDOMAIN with EDE 15 or REFUSED with EDE 18.
	Denied Observed = "denied"
	// Connected: a direct TCP connect succeeded (a bypass).
	Connected Observed = "connected"
	// Blocked: a direct TCP connect failed (refused, timed out, unreachable).
	Blocked Observed = "blocked"
	// NoDecision: no answer that tells egressd's decision (proxy or resolver
	// unreachable, a timeout, a limit, an answer that is not egressd's).
	NoDecision Observed = "no-decision"
)

// Result is one step of one check, judged.
type Result struct {
	Check    Check
	Via      Via
	Target   string        // host:port (proxy, direct) or the query name (dns)
	Observed Observed      // what happened
	Reason   string        // egressd's reason, when it gave one
	Status   string        // "200", "403", "NXDOMAIN", "connection refused", …
	Detail   string        // more, for a person: the proxy's body line, the EDE text, the error
	Pass     bool          // Observed matches Check.Expect (and Reason)
	Why      string        // why it does not pass; a note when it passes with an upstream failure
	Duration time.Duration // how long the step took
}

// judge sets Pass and Why from the observation and the expectation.
//
// An allow expectation is met by an upstream failure: the check asks
// whether egressd's policy lets the request through, and a 502 says it did
// (the audit record's outcome says what failed); Why keeps the failure
// visible. A direct step expects the connect to fail, whatever the check
// says: success means the NetworkPolicy lets traffic bypass egressd.
func (r *Result) judge() {
	switch {
	case r.Via == ViaDirect:
		switch r.Observed {
		case Blocked:
			r.Pass = true
		case Connected:
			r.Why = "bypass: a direct connection without the proxy succeeded; the NetworkPolicy does not confine this pod"
		default:
			r.Why = "could not test the bypass: " + r.Detail
		}
	case r.Check.Expect == ExpectAllow:
		switch r.Observed {
		case Allowed:
			r.Pass = true
		case UpstreamFailed:
			r.Pass = true
			r.Why = "allowed by policy; the upstream failed: " + r.Detail
		case Denied:
			r.Why = fmt.Sprintf("denied (%s), want allowed", r.Reason)
		default:
			r.Why = "no decision seen: " + r.Detail
		}
	case r.Check.Expect == ExpectDeny:
		switch r.Observed {
		case Denied:
			if r.Check.Reason != "" && r.Reason != r.Check.Reason {
				r.Why = fmt.Sprintf("denied with reason %s, want %s", r.Reason, r.Check.Reason)
				return
			}
			r.Pass = true
		case Allowed, UpstreamFailed:
			r.Why = "allowed by policy, want denied"
			if r.Check.Reason != "" {
				r.Why += " (" + r.Check.Reason + ")"
			}
		default:
			r.Why = "no decision seen: " + r.Detail
		}
	}
}

// Summary counts results.
type Summary struct {
	Total, Passed, Failed int
}

// Summarize counts passing and failing results.
func Summarize(rs []Result) Summary {
	s := Summary{Total: len(rs)}
	for _, r := range rs {
		if r.Pass {
			s.Passed++
		} else {
			s.Failed++
		}
	}
	return s
}
