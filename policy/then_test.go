package policy

import "testing"

// TestThen: the one rule of a request's later steps, "keep the first
// reason enforce would give".
func TestThen(t *testing.T) {
	allowed := Decision{Verdict: Allow, Reason: ReasonAllowed, Policy: "ns/p", Rule: 0, Mode: ModeEnforce}
	soft := Decision{Verdict: Allow, Reason: ReasonPrivate, WouldDeny: true, Policy: "ns/p", Mode: ModeAudit}
	soft2 := Decision{Verdict: Allow, Reason: ReasonSNIMismatch, WouldDeny: true, Policy: "ns/p", Mode: ModeAudit}
	denied := Denied(ReasonSNIMismatch)
	never := Denied(ReasonMetadata)
	for _, tc := range []struct {
		name      string
		cur, next Decision
		want      Decision
	}{
		{"none yet takes the next", Decision{}, soft, soft},
		{"allowed takes a denial", allowed, denied, denied},
		{"allowed takes a softened refusal", allowed, soft, soft},
		{"softened keeps its first reason", soft, soft2, soft},
		{"softened keeps it against an allow", soft, allowed, soft},
		{"softened gives way to a denial", soft, never, never},
		{"a denial stays", denied, never, denied},
		{"a denial stays against an allow", denied, allowed, denied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cur.Then(tc.next); got.Reason != tc.want.Reason || got.Verdict != tc.want.Verdict || got.WouldDeny != tc.want.WouldDeny {
				t.Fatalf("Then = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFirstRefusal: of refusals at once, the first, the never class first.
func TestFirstRefusal(t *testing.T) {
	priv, ll, md := Denied(ReasonPrivate), Denied(ReasonLinkLocal), Denied(ReasonMetadata)
	for _, tc := range []struct {
		name string
		in   []Decision
		want Reason
	}{
		{"one", []Decision{priv}, ReasonPrivate},
		{"first of two never", []Decision{md, ll}, ReasonMetadata},
		{"first of two never, other order", []Decision{ll, md}, ReasonLinkLocal},
		{"never after private", []Decision{priv, ll}, ReasonLinkLocal},
		{"private after never", []Decision{md, priv}, ReasonMetadata},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Decision
			for _, d := range tc.in {
				got = FirstRefusal(got, d)
			}
			if got.Reason != tc.want {
				t.Fatalf("FirstRefusal = %s, want %s", got.Reason, tc.want)
			}
		})
	}
}
