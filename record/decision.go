package record

import "github.com/egressd/egressd/policy"

// SetDecision copies a decision into r.
func (r *Record) SetDecision(d policy.Decision) {
	r.Verdict = string(d.Verdict)
	r.WouldDeny = d.WouldDeny
	r.Reason = string(d.Reason)
	r.Policy, r.Purpose, r.Owner = d.Policy, d.Purpose, d.Owner
	r.RuleName, r.PolicyGeneration = d.RuleName, d.PolicyGeneration
	r.Rule = nil
	if d.Policy != "" && d.Rule >= 0 {
		rule := d.Rule
		r.Rule = &rule
	}
}

// OutcomeOf is a record's outcome, for every kind (connect, sni, http,
// inspected, dns), derived from its decision d and after, what happened
// once it was decided (one of the Outcome constants for a failure, a cut
// or a timeout; "" for nothing): revoked when a policy or identity change
// cut it (its decision, the new one, denies); refused for any other denial
// (an audit-mode allow with would_deny was not refused); else after; else
// ok.
func OutcomeOf(d policy.Decision, after string) string {
	switch {
	case after == OutcomeRevoked:
		return OutcomeRevoked
	case !d.Allowed():
		return OutcomeRefused
	case after != "":
		return after
	}
	return OutcomeOK
}
