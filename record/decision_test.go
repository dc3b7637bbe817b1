package record

import (
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestOutcomeOf holds the one derivation of every kind's outcome: revoked
// before the denial it carries, refused for any other denial whatever
// happened after it, what happened after an allow, else ok.
func TestOutcomeOf(t *testing.T) {
	allow := policy.Decision{Verdict: policy.Allow, Reason: policy.ReasonAllowed}
	deny := policy.Denied(policy.ReasonNotAllowlisted)
	wouldDeny := policy.Decision{Verdict: policy.Allow, Reason: policy.ReasonNotAllowlisted, WouldDeny: true}
	for _, tc := range []struct {
		name  string
		d     policy.Decision
		after string
		want  string
	}{
		{"allowed, nothing after", allow, "", OutcomeOK},
		{"allowed, dial failed", allow, OutcomeDialFailed, OutcomeDialFailed},
		{"allowed, drained", allow, OutcomeDrained, OutcomeDrained},
		{"dns allowed, upstreams failed", allow, OutcomeResolveFailed, OutcomeResolveFailed},
		{"denied", deny, "", OutcomeRefused},
		{"denied, a failure after is not the outcome", deny, OutcomeUpstreamError, OutcomeRefused},
		{"revoked: its new decision denies", deny, OutcomeRevoked, OutcomeRevoked},
		{"audit mode would deny: served", wouldDeny, "", OutcomeOK},
		{"no decision: refused", policy.Decision{}, "", OutcomeRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OutcomeOf(tc.d, tc.after); got != tc.want {
				t.Fatalf("OutcomeOf(%s %s, %q) = %q, want %q", tc.d.Verdict, tc.d.Reason, tc.after, got, tc.want)
			}
		})
	}
}
