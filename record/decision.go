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
