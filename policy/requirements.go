package policy

import "slices"

// Requirements are what a rule asks of a connection it allows beyond its
// verdict: whether its tunnels are inspected, and the http entries each
// request inside one is held to. An open tunnel was set up for the
// requirements of the decision that admitted it; revocation compares them
// with the new decision's (Change) and closes a tunnel that can no longer
// give what the rule now asks (docs/design.md, "Policy", revocation). A
// new requirement of a rule is one more field here and one more line in
// Change.
type Requirements struct {
	// Inspect: the rule inspects (Snapshot.Inspects).
	Inspect bool
	// http is the inspecting rule's compiled entries; shared with the
	// snapshot, never modified.
	http []compiledHTTP
}

// Requirements returns what the rule of d asks of the connection d
// allows: the zero Requirements for a blind rule (one field check, no
// lookup), a denial or a decision audit mode softened (relayed blind).
func (s *Snapshot) Requirements(d Decision) Requirements {
	if !s.Inspects(d) {
		return Requirements{}
	}
	return Requirements{Inspect: true, http: s.rule(d).http}
}

// Change says, in words for the record, how n differs from r (the
// requirements an open connection was set up for): "" when the connection
// still gives everything n asks.
func (r Requirements) Change(n Requirements) string {
	switch {
	case !r.Inspect && n.Inspect:
		return "the rule now inspects the host, and the tunnel is not inspected"
	case r.Inspect && !n.Inspect:
		return "the rule no longer inspects the host, and the tunnel is inspected"
	case !slices.EqualFunc(r.http, n.http, compiledHTTP.equal):
		return "the rule's http entries changed"
	}
	return ""
}

func (c compiledHTTP) equal(o compiledHTTP) bool {
	return slices.Equal(c.methods, o.methods) && slices.Equal(c.paths, o.paths)
}
