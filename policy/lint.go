package policy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Warning is one lint finding of Lint.
type Warning struct {
	Origin  string
	Message string
}

// String returns "origin: message".
func (w Warning) String() string { return w.Origin + ": " + w.Message }

// Lint returns warnings for valid documents: patterns that span tenants of
// a private public suffix, container registries, wide address rules,
// duplicate and shadowed rules, and (when pods is not nil) policies that
// select none of the given clients. Invalid parts of a document are
// skipped: Validate reports them. Warnings come in document order.
//
// Findings:
//   - a wildcard that spans tenants of a privately registered public
//     suffix, at the pattern's fixed part ("*.s3.amazonaws.com",
//     "*.github.io") or below it ("**.amazonaws.com" covers every bucket of
//     s3.amazonaws.com, "**.windows.net" every account of
//     blob.core.windows.net): anyone can own a name there, so the rule is
//     an exfiltration path;
//   - a host pattern that matches a container registry or the hosts its
//     image layers come from (registryHosts): image pulls are the
//     kubelet's traffic on the node, not the pod's, and a pod that can
//     reach a registry can push to it;
//   - an address rule (cidrs, no hosts) wider than an IPv4 /16 or an IPv6
//     /48: every address of it is reachable by IP literal, with no name;
//   - a rule whose deletion changes no decision (redundant): another rule
//     of the same policy matches its hosts, ports and phase and comes
//     first, or comes later with the same cidrs, ech, inspect and http and
//     no rule between them decides its requests otherwise;
//   - a host pattern another pattern of the same rule covers;
//   - a cidr beside hosts that opens every address of its family
//     (0.0.0.0/0, ::/0);
//   - an inspecting rule and a blind one that both allow a name on a port
//     (lintInspect): the first decides whether it is inspected;
//   - a policy that selects none of pods.
func Lint(docs []Document, pods []*Client) []Warning {
	var out []Warning
	for _, d := range docs {
		l := linter{origin: d.Origin}
		l.policy(&d.Policy, pods)
		out = append(out, l.warnings...)
	}
	return out
}

type linter struct {
	origin   string
	warnings []Warning
}

func (l *linter) warn(format string, args ...any) {
	l.warnings = append(l.warnings, Warning{Origin: l.origin, Message: fmt.Sprintf(format, args...)})
}

// lintRule is the parsed form of a rule, its invalid parts left out.
type lintRule struct {
	hosts []Pattern
	ports []int32
	cidrs []netip.Prefix
	rule  *EgressRule
}

func (l *linter) policy(p *EgressPolicy, pods []*Client) {
	rules := make([]lintRule, len(p.Spec.Egress))
	for i, r := range p.Spec.Egress {
		field := fmt.Sprintf("spec.egress[%d]", i)
		for j, h := range r.Hosts {
			pat, err := parsePattern(h)
			if err != nil {
				continue
			}
			rules[i].hosts = append(rules[i].hosts, pat)
			if ps, more := coveredPrivateSuffixes(pat); ps != "" {
				also := ""
				if more > 0 {
					also = fmt.Sprintf(" (and %d more)", more)
				}
				l.warn("%s.hosts[%d] %q: covers tenants of the privately registered public suffix %q%s: any tenant of that service can own a matching host, a data exfiltration path; name the exact hosts",
					field, j, h, ps, also)
			}
			if reg, ok := registryOf(pat); ok {
				l.warn("%s.hosts[%d] %q: matches the container registry host %q: image pulls are the kubelet's traffic on the node, not the pod's, so a pod rarely needs it; and a pod that can reach a registry can push to it, a data exfiltration path",
					field, j, h, reg)
			}
		}
		for j, a := range rules[i].hosts {
			for k, b := range rules[i].hosts {
				if j != k && b.Covers(a) && (!a.Covers(b) || k < j) {
					l.warn("%s.hosts: %q is already matched by %q", field, a, b)
					break
				}
			}
		}
		rules[i].ports = r.Ports
		rules[i].rule = &p.Spec.Egress[i]
		for j, c := range r.CIDRs {
			pfx, err := parseCIDR(c)
			if err != nil {
				continue
			}
			rules[i].cidrs = append(rules[i].cidrs, pfx)
			switch {
			case len(r.Hosts) == 0 && wideAddressRule(pfx):
				l.warn("%s.cidrs[%d] %q: a wide address rule (2^%d addresses): each is reachable by IP literal on ports %v, with no name to check; name the hosts, or narrow the range to the servers",
					field, j, c, pfx.Addr().BitLen()-pfx.Bits(), r.Ports)
			case len(r.Hosts) > 0 && pfx.Bits() == 0:
				l.warn("%s.cidrs[%d] %q: opens every private address of its family to the rule's hosts", field, j, c)
			}
		}
	}
	for i := range rules {
		if j, dup, ok := redundant(rules, i); ok {
			switch {
			case dup:
				l.warn("spec.egress[%d] duplicates spec.egress[%d]: it allows nothing more, and rule %d decides", i, j, j)
			case j < i:
				l.warn("spec.egress[%d] is shadowed by the broader spec.egress[%d], which comes first: it never decides a request", i, j)
			default:
				l.warn("spec.egress[%d] is shadowed by the broader spec.egress[%d]: deleting it changes no decision, only the rule, purpose and owner its records name", i, j)
			}
		}
	}
	l.lintInspect(p, rules)
	if pods != nil && !selectsAny(p, pods) {
		l.warn("selects none of the %d given pods", len(pods))
	}
}

// redundant reports whether deleting rule i of a policy changes no
// decision, and names the rule j that makes it so (dup: i and j match
// alike). Rules of one policy share its selector, serviceAccountNames and
// mode, so only the rules' own fields count; rules of different policies
// are never compared. Decide takes the first rule that matches, so:
//   - an earlier rule j that matches every request i matches (matches)
//     means i never decides;
//   - a later one means i's requests go to j once i is gone: the same
//     decision only when j gives them the same effect (sameEffect) and no
//     rule between i and j that may match one of them gives another.
func redundant(rules []lintRule, i int) (j int, dup, ok bool) {
	ri := &rules[i]
	for j := range i {
		if rules[j].matches(ri) {
			return j, ri.matches(&rules[j]) && ri.sameEffect(&rules[j]), true
		}
	}
	for j := i + 1; j < len(rules); j++ {
		rj := &rules[j]
		if ri.matches(rj) {
			return 0, false, false // j is the redundant one: deleting both would change decisions
		}
		if rj.matches(ri) && rj.sameEffect(ri) {
			return j, false, true
		}
		if rj.mayMatchSome(ri) && !rj.sameEffect(ri) {
			return 0, false, false // j takes some of i's requests, with another effect
		}
	}
	return 0, false, false
}

// matches reports whether r matches every request q matches: q's hosts,
// ports and phase. A rule without valid hosts (an address rule) matches
// nothing here and is matched by nothing.
func (r *lintRule) matches(q *lintRule) bool {
	if len(r.hosts) == 0 || len(q.hosts) == 0 {
		return false
	}
	if r.rule.Phase == PhaseInit && q.rule.Phase != PhaseInit {
		return false // r stops matching once the pod is initialized
	}
	for _, qh := range q.hosts {
		if !slices.ContainsFunc(r.hosts, func(rh Pattern) bool { return rh.Covers(qh) }) {
			return false
		}
	}
	for _, p := range q.ports {
		if !slices.Contains(r.ports, p) {
			return false
		}
	}
	return true
}

// mayMatchSome reports whether some request matches both r and q.
func (r *lintRule) mayMatchSome(q *lintRule) bool {
	_, _, hosts := overlap(r.hosts, q.hosts)
	return hosts && sharePort(r.ports, q.ports)
}

// sameEffect reports whether r and q give a request they decide the same
// treatment: the address ranges the guard may open (cidrs), ech, inspection
// and its http limits. It is the one place a new field of a rule that
// changes what the rule allows is compared.
func (r *lintRule) sameEffect(q *lintRule) bool {
	a, b := r.rule, q.rule
	return sameSet(r.cidrs, q.cidrs) &&
		a.ECH == b.ECH &&
		a.Inspect == b.Inspect &&
		reflect.DeepEqual(a.HTTP, b.HTTP)
}

func sameSet[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func selectsAny(p *EgressPolicy, pods []*Client) bool {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return true // invalid: Validate says so
	}
	for _, c := range pods {
		if c == nil || c.Namespace != p.Namespace {
			continue
		}
		if len(p.Spec.ServiceAccountNames) > 0 && !slices.Contains(p.Spec.ServiceAccountNames, c.ServiceAccount) {
			continue
		}
		if sel.Matches(labels.Set(c.Labels)) {
			return true
		}
	}
	return false
}
