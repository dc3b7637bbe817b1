package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

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

// Lint returns warnings for valid documents: patterns under a private public
// suffix, duplicate and shadowed rules, and (when pods is not nil) policies
// that select none of the given clients. Invalid parts of a document are
// skipped: Validate reports them. Warnings come in document order.
//
// Findings:
//   - a wildcard over a privately registered public suffix
//     ("*.s3.amazonaws.com", "**.blob.core.windows.net", "*.github.io"):
//     anyone can own a name there, so the rule is an exfiltration path;
//   - a rule whose hosts, ports and cidrs another rule of the same policy
//     already allows (duplicate, or shadowed by a broader rule): it adds
//     nothing, and its purpose and owner never reach an audit record;
//   - a host pattern another pattern of the same rule covers;
//   - a cidr that opens every address of its family (0.0.0.0/0, ::/0);
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
			if ps, ok := privateSuffix(pat); ok {
				l.warn("%s.hosts[%d] %q: under the privately registered public suffix %q: any tenant of that service can own a matching host, a data exfiltration path; name the exact hosts",
					field, j, h, ps)
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
		for j, c := range r.CIDRs {
			pfx, err := parseCIDR(c)
			if err != nil {
				continue
			}
			rules[i].cidrs = append(rules[i].cidrs, pfx)
			if pfx.Bits() == 0 {
				l.warn("%s.cidrs[%d] %q: opens every private address of its family to the rule's hosts", field, j, c)
			}
		}
	}
	for i := range rules {
		for j := range rules {
			if i == j || !rules[j].covers(&rules[i]) {
				continue
			}
			if rules[i].covers(&rules[j]) {
				if j < i {
					l.warn("spec.egress[%d] duplicates spec.egress[%d]: it allows nothing more, and rule %d decides", i, j, j)
					break
				}
				continue
			}
			l.warn("spec.egress[%d] is shadowed by the broader spec.egress[%d]: it allows nothing more", i, j)
			break
		}
	}
	if pods != nil && !selectsAny(p, pods) {
		l.warn("selects none of the %d given pods", len(pods))
	}
}

// privateSuffix reports whether a wildcard pattern spans a privately
// registered public suffix (ICANN suffixes are refused by ParsePattern).
func privateSuffix(p Pattern) (string, bool) {
	wild := -1
	for i, l := range p.labels {
		if l == "*" || l == "**" {
			wild = i
		}
	}
	if wild < 0 || wild == len(p.labels)-1 {
		return "", false
	}
	return suffixAt(strings.Join(p.labels[wild+1:], "."), false)
}

// covers reports whether r allows everything q allows. A rule without
// valid hosts covers nothing and is covered by nothing.
func (r *lintRule) covers(q *lintRule) bool {
	if len(r.hosts) == 0 || len(q.hosts) == 0 {
		return false
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
	for _, qc := range q.cidrs {
		if !slices.ContainsFunc(r.cidrs, func(rc netip.Prefix) bool {
			return rc.Bits() <= qc.Bits() && rc.Contains(qc.Addr())
		}) {
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
