package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/egressd/egressd/policy"
)

// reasonHints say in a line what each reason of a decision means, for
// `egressd explain`.
var reasonHints = map[policy.Reason]string{
	policy.ReasonAllowed:        "a rule of a policy that selects the pod allows host and port",
	policy.ReasonNotAllowlisted: "no rule of a policy that selects the pod names the host",
	policy.ReasonPortNotAllowed: "rules of a policy that selects the pod name the host, none on this port",
	policy.ReasonInitOnly:       "only rules with phase: init allow it, and the pod's Initialized condition is True",
	policy.ReasonUnknownClient:  "the source is no single Running or Pending pod: denied in every mode",
	policy.ReasonInvalidHost:    "the host is not a valid name or address: denied in every mode",
	policy.ReasonIPLiteral:      "an IP destination outside every address rule (cidrs without hosts) of a policy that selects the pod",
	policy.ReasonMetadata:       "a cloud metadata name or address: denied in every mode, no rule opens it",
	policy.ReasonLinkLocal:      "a link-local address: denied in every mode, no rule opens it",
	policy.ReasonReserved:       "an unspecified, multicast or broadcast address: denied in every mode",
	policy.ReasonSelf:           "one of egressd's own listeners: never dialled",
	policy.ReasonPrivate:        "a non-public address outside the deciding rule's cidrs",
}

// WriteJSON prints the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// explainWriter prints aligned "label  text" lines.
type explainWriter struct {
	w   io.Writer
	err error
}

func (p *explainWriter) line(label, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%-10s  %s\n", label, fmt.Sprintf(format, args...))
}

func (p *explainWriter) indent(depth int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", depth), fmt.Sprintf(format, args...))
}

// WriteText prints the report as aligned "label  text" lines.
func (r *Report) WriteText(w io.Writer) error {
	p := &explainWriter{w: w}
	if r.Kind == "dns" {
		p.line("request", "dns %s (any port)", r.Host)
	} else {
		p.line("request", "%s %s:%d", r.Kind, r.Host, r.Port)
	}
	switch {
	case r.HostError != "":
		p.line("host", "invalid: %s", r.HostError)
	case r.NormalizedHost != "" && r.Address:
		p.line("host", "%s is the address %s", r.Host, r.NormalizedHost)
	case r.NormalizedHost != "":
		p.line("host", "%s is %s", r.Host, r.NormalizedHost)
	}
	writeIdentity(p, r)
	if r.Identity.Known {
		writeMode(p, r)
		writePolicies(p, r)
	} else {
		p.line("policies", "not consulted: an unknown client is denied in every mode")
	}
	for _, inv := range r.InvalidPolicies {
		p.line("invalid", "%s: not in force", inv)
	}
	writeAddresses(p, r)
	writeHTTP(p, r)
	writeVerdict(p, r)
	return p.err
}

func writeIdentity(p *explainWriter, r *Report) {
	id := r.Identity
	if !id.Known {
		p.line("client", "unknown: %s", id.Why)
		return
	}
	p.line("client", "pod %s/%s, ip %s, service account %s, initialized: %s",
		id.Namespace, id.Pod, id.IP, id.ServiceAccount, yesNo(id.Initialized))
	keys := slices.Sorted(maps.Keys(id.Labels))
	ls := make([]string, 0, len(keys))
	for _, k := range keys {
		ls = append(ls, k+"="+id.Labels[k])
	}
	if len(ls) == 0 {
		ls = []string{"none"}
	}
	p.line("", "labels: %s", strings.Join(ls, ", "))
}

func writeMode(p *explainWriter, r *Report) {
	own := policy.Mode("")
	for _, pe := range r.Policies {
		if pe.ID == r.AuditPolicy {
			own = pe.Mode
		}
	}
	switch {
	case r.ClientMode == policy.ModeAudit && r.AuditPolicy != "" && own == "":
		p.line("mode", "audit: %s selects the pod and has the instance's --mode, audit", r.AuditPolicy)
	case r.ClientMode == policy.ModeAudit && r.AuditPolicy != "":
		p.line("mode", "audit: %s selects the pod and says mode: audit", r.AuditPolicy)
	case r.ClientMode == policy.ModeAudit:
		p.line("mode", "audit: the instance's --mode")
	case r.InstanceMode == policy.ModeAudit:
		p.line("mode", "enforce: the policies that select the pod say mode: enforce (the instance's --mode is audit)")
	default:
		p.line("mode", "enforce")
	}
}

func writePolicies(p *explainWriter, r *Report) {
	ns := r.Identity.Namespace
	if len(r.Policies) == 0 {
		p.line("policies", "none in namespace %s", ns)
		return
	}
	p.line("policies", "%d in namespace %s", len(r.Policies), ns)
	for _, pe := range r.Policies {
		mode := "the instance's"
		if pe.Mode != "" {
			mode = string(pe.Mode)
		}
		sel := "selects the pod"
		if !pe.Selects {
			sel = "does not select the pod"
		}
		p.indent(1, "%s: %s [mode: %s]", pe.ID, sel, mode)
		for _, m := range pe.NotSelected {
			p.indent(2, "%s wants %s; the pod has %s", m.Field, m.Want, m.Have)
		}
		if len(pe.Rules) == 0 {
			if r.Address {
				p.indent(2, "no address rule holds the address")
			} else {
				p.indent(2, "no rule names the host")
			}
		}
		for _, re := range pe.Rules {
			p.indent(2, "%s", ruleLine(r, pe, re))
		}
	}
}

// ruleLine describes one rule that names the host and what it does for
// the request.
func ruleLine(r *Report, pe policy.PolicyExplanation, re policy.RuleExplanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec.egress[%d]:", re.Index)
	if r.Address {
		fmt.Fprintf(&b, " address rule, cidrs %s hold it;", strings.Join(re.CIDRs, ", "))
	} else {
		fmt.Fprintf(&b, " hosts %s", strings.Join(re.Patterns, ", "))
		if len(re.CIDRs) > 0 {
			fmt.Fprintf(&b, " (may resolve into %s)", strings.Join(re.CIDRs, ", "))
		}
		b.WriteString(";")
	}
	ports := make([]string, 0, len(re.Ports))
	for _, port := range re.Ports {
		ports = append(ports, strconv.Itoa(int(port)))
	}
	fmt.Fprintf(&b, " ports %s", strings.Join(ports, ", "))
	switch {
	case r.Kind == "dns":
		b.WriteString(" (a DNS question is about any port)")
	case re.PortMatch:
		fmt.Fprintf(&b, " (%d listed)", r.Port)
	default:
		fmt.Fprintf(&b, " (%d not listed)", r.Port)
	}
	if re.Phase != "" {
		fmt.Fprintf(&b, "; phase %s", re.Phase)
	}
	if re.ECH {
		b.WriteString("; ech: allow")
	}
	if c := re.Credential; c != nil {
		fmt.Fprintf(&b, "; credential %s in %s", c.Name, c.Header)
	}
	b.WriteString(" → ")
	switch {
	case re.Decides:
		b.WriteString("allows: decides")
	case re.Allows:
		b.WriteString("allows (an earlier rule decides)")
	case !pe.Selects:
		b.WriteString("does not apply: the policy does not select the pod")
	case !re.PortMatch:
		b.WriteString("does not allow this port")
	case re.InitOnly:
		b.WriteString("init-only: the pod is initialized")
	}
	if re.Purpose != "" {
		fmt.Fprintf(&b, " [purpose: %s]", re.Purpose)
	}
	return b.String()
}

func writeAddresses(p *explainWriter, r *Report) {
	if r.DNS != nil {
		switch {
		case r.DNS.Error != "":
			p.line("dns", "lookup failed: %s", r.DNS.Error)
		default:
			ans := strings.Join(r.DNS.Answers, ", ")
			if len(r.DNS.CNAMEs) > 0 {
				ans += " (via " + strings.Join(r.DNS.CNAMEs, " → ") + ")"
			}
			p.line("dns", "%s", ans)
		}
	}
	if len(r.Addresses) > 0 {
		switch {
		case r.Kind == "dns":
			p.line("addresses", "the resolver answers with them, less the never class")
		case !r.Explanation.Decision.Allowed():
			p.line("guard", "nothing is dialled: the request is denied")
		default:
			p.line("guard", "run dials the permitted addresses in order until one connects")
		}
	}
	for _, a := range r.Addresses {
		var what string
		switch {
		case r.Kind == "dns" && a.Class == policy.ClassNever:
			what = "removed (" + string(a.Reason) + ")"
		case r.Kind == "dns":
			what = "answered"
		case !r.Explanation.Decision.Allowed():
			what = "not dialled"
			if a.Reason != "" {
				what += " (" + string(a.Reason) + ")"
			}
		case a.Softened:
			what = "refused (" + string(a.Reason) + "), let through by audit mode"
		case a.Permitted:
			what = "permitted"
		default:
			what = "refused (" + string(a.Reason) + ")"
		}
		p.indent(1, "%s  %s: %s", a.Addr, a.Class, what)
	}
	if r.GuardNote != "" {
		p.line("guard", "%s", r.GuardNote)
	}
}

func writeVerdict(p *explainWriter, r *Report) {
	d := r.final
	var b strings.Builder
	b.WriteString(string(d.Verdict))
	if d.WouldDeny {
		b.WriteString(" (would_deny: enforce mode denies it)")
	}
	fmt.Fprintf(&b, ", reason %s", d.Reason)
	if d.Policy != "" {
		fmt.Fprintf(&b, ", policy %s", d.Policy)
	}
	switch {
	case d.RuleName != "":
		fmt.Fprintf(&b, ", rule %s (spec.egress[%d])", d.RuleName, d.Rule)
	case d.Rule >= 0:
		fmt.Fprintf(&b, ", rule %d", d.Rule)
	}
	if d.Owner != "" {
		fmt.Fprintf(&b, ", owner %s", d.Owner)
	}
	p.line("verdict", "%s", b.String())
	if hint := reasonHints[d.Reason]; hint != "" {
		p.line("", "%s", hint)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
