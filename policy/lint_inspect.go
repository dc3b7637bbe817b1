package policy

import "slices"

// lintInspect warns where inspection does not apply as a rule seems to
// say: inspect on a rule applies only to the names that rule decides, and
// of several rules that allow a name on a port, the first decides (Decide's
// precedence). So an inspecting rule that overlaps a blind one on a port
// either is not inspected for the common names (the blind one comes first)
// or imposes its http limits on names the blind one would let through
// unlimited (it comes first); a wildcard makes such overlaps easy to miss.
func (l *linter) lintInspect(p *EgressPolicy, rules []lintRule) {
	for i, ri := range p.Spec.Egress {
		if !ri.Inspect {
			continue
		}
		for j, rj := range p.Spec.Egress {
			if rj.Inspect || !sharePort(ri.Ports, rj.Ports) {
				continue
			}
			a, b, ok := overlap(rules[i].hosts, rules[j].hosts)
			if !ok {
				continue
			}
			if j < i {
				l.warn("spec.egress[%d] inspects %q, but spec.egress[%d] allows %q without inspect and comes first: a name both match is decided by rule %d and relayed blind, without rule %d's http limits",
					i, a, j, b, j, i)
			} else {
				l.warn("spec.egress[%d] allows %q without inspect, but spec.egress[%d] inspects %q and comes first: a name both match is inspected and held to rule %d's http limits",
					j, b, i, a, i)
			}
		}
	}
}

func sharePort(a, b []int32) bool {
	for _, p := range a {
		if slices.Contains(b, p) {
			return true
		}
	}
	return false
}

// overlap returns the first pair of patterns, one of as and one of bs,
// that some name matches both.
func overlap(as, bs []Pattern) (Pattern, Pattern, bool) {
	for _, a := range as {
		for _, b := range bs {
			if patternsIntersect(a.labels, b.labels) {
				return a, b, true
			}
		}
	}
	return Pattern{}, Pattern{}, false
}
