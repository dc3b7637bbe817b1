package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Explanation says why Decide decides a request as it does, for `egressd
// explain`: every policy of the client's namespace, whether it selects the
// client and why not, and the rules that name the host. Decision is
// Decide's own answer for the same arguments; the rest only explains it.
type Explanation struct {
	// Decision is exactly Decide(a).
	Decision Decision `json:"-"`
	// InstanceMode is a.Mode (enforce when empty); ClientMode the mode
	// that applies to the client, and AuditPolicy the first selecting
	// policy in audit mode that makes it audit ("" when the instance's
	// mode does, or the mode is enforce).
	InstanceMode Mode   `json:"instanceMode"`
	ClientMode   Mode   `json:"clientMode"`
	AuditPolicy  string `json:"auditPolicy,omitempty"`
	// Address is set when the host is an IP literal: only address rules
	// (cidrs, no hosts) can open it.
	Address bool `json:"address,omitempty"`
	// Policies of the client's namespace, in order of precedence; nil
	// without a client.
	Policies []PolicyExplanation `json:"policies"`
}

// PolicyExplanation is one policy of the client's namespace.
type PolicyExplanation struct {
	ID     string `json:"policy"` // "namespace/name"
	Origin string `json:"origin"`
	// Mode is the policy's spec.mode; "" means the instance's.
	Mode    Mode `json:"mode,omitempty"`
	Selects bool `json:"selects"`
	// NotSelected says why the policy does not select the client: each
	// label requirement the pod's labels fail, and the service account.
	NotSelected []SelectionMismatch `json:"notSelected,omitempty"`
	// Rules are the policy's rules that name the host (a pattern matches
	// it) or, for an IP literal, the address rules whose cidrs hold it.
	Rules []RuleExplanation `json:"rules,omitempty"`
}

// SelectionMismatch is one reason a policy does not select a pod.
type SelectionMismatch struct {
	// Field is "podSelector" or "serviceAccountNames".
	Field string `json:"field"`
	// Want is the requirement ("app=llm", "tier in (batch,etl)",
	// "!canary", or the listed service accounts); Have is what the pod
	// has ("app=web", "no label app", its service account).
	Want string `json:"want"`
	Have string `json:"have"`
}

// RuleExplanation is one rule that names the host.
type RuleExplanation struct {
	Index int `json:"rule"` // in the policy's spec.egress
	// Patterns are the rule's host patterns that match the host; CIDRs
	// the rule's cidrs (for an IP literal, those that hold it).
	Patterns []string `json:"patterns,omitempty"`
	CIDRs    []string `json:"cidrs,omitempty"`
	Ports    []int32  `json:"ports"`
	// PortMatch: the rule lists the port (any port for a DNS question).
	PortMatch bool   `json:"portMatch"`
	Phase     string `json:"phase,omitempty"`
	// InitOnly: the rule is phase init and the pod is initialized, so it
	// does not allow.
	InitOnly bool `json:"initOnly,omitempty"`
	ECH      bool `json:"ech,omitempty"`
	// Credential is the credential the rule adds to the requests it
	// allows (name, header and format; never a value); nil if none.
	Credential *Credential `json:"credential,omitempty"`
	// Allows: the rule alone allows the request (its policy selects the
	// client, the port matches, and it is not init-only).
	Allows bool `json:"allows"`
	// Decides: it is the rule of the decision (the first that allows, in
	// order of precedence).
	Decides bool   `json:"decides"`
	Purpose string `json:"purpose,omitempty"`
	Owner   string `json:"owner,omitempty"`
}

// Explain returns the explanation of Decide(a). It allocates and parses
// the rules' patterns again: it is for `egressd explain`, not the request
// path.
func (s *Snapshot) Explain(a DecideArgs) Explanation {
	e := Explanation{Decision: s.Decide(a), InstanceMode: cmp.Or(a.Mode, ModeEnforce)}
	if a.Client == nil {
		e.ClientMode = e.InstanceMode
		return e
	}
	mode, audit := s.modeFor(a.Client, a.Mode)
	e.ClientMode = mode
	if audit >= 0 {
		e.AuditPolicy = s.pols[audit].id
	}
	var addr netip.Addr
	if looksLikeIP(a.Host) {
		if ip, err := netip.ParseAddr(a.Host); err == nil {
			addr, e.Address = plain(ip), true
		}
	}
	if s == nil {
		return e
	}
	idx := s.ns[a.Client.Namespace]
	if idx == nil {
		return e
	}
	e.Policies = []PolicyExplanation{}
	for _, pi := range idx.pols {
		p := &s.pols[pi]
		pe := PolicyExplanation{ID: p.id, Origin: s.docs[pi].Origin, Mode: p.mode, Selects: p.selects(a.Client)}
		if !pe.Selects {
			pe.NotSelected = p.whyNot(a.Client)
		}
		// A policy's rules are contiguous in s.rules (compile order).
		first, _ := slices.BinarySearchFunc(s.rules, pi, func(r compiledRule, pi int32) int { return cmp.Compare(r.pol, pi) })
		for num := first; num < len(s.rules) && s.rules[num].pol == pi; num++ {
			r := &s.rules[num]
			spec := &s.docs[pi].Policy.Spec.Egress[r.index]
			re := RuleExplanation{Index: r.index, Ports: spec.Ports, PortMatch: r.allowsPort(a.Port),
				Phase: spec.Phase, InitOnly: r.initOnly && a.Client.Initialized, ECH: r.ech,
				Purpose: r.purpose, Owner: r.owner, Credential: r.credential}
			switch {
			case e.Address:
				if len(spec.Hosts) > 0 || !inCIDRs(r.cidrs, addr) {
					continue
				}
				for _, c := range r.cidrs {
					if inCIDRs([]netip.Prefix{c}, addr) {
						re.CIDRs = append(re.CIDRs, c.String())
					}
				}
			default:
				for _, h := range spec.Hosts {
					if pat, err := parsePattern(h); err == nil && pat.Match(a.Host) {
						re.Patterns = append(re.Patterns, pat.String())
					}
				}
				if len(re.Patterns) == 0 {
					continue
				}
				re.CIDRs = spec.CIDRs
			}
			re.Allows = pe.Selects && re.PortMatch && !re.InitOnly
			re.Decides = e.Decision.Allowed() && !e.Decision.WouldDeny && e.Decision.Reason == ReasonAllowed &&
				e.Decision.Policy == p.id && e.Decision.Rule == r.index
			pe.Rules = append(pe.Rules, re)
		}
		e.Policies = append(e.Policies, pe)
	}
	return e
}

// whyNot lists what keeps p from selecting c: the service account first,
// then each label requirement c's labels fail.
func (p *compiledPolicy) whyNot(c *Client) []SelectionMismatch {
	var out []SelectionMismatch
	if len(p.sas) > 0 && !slices.Contains(p.sas, c.ServiceAccount) {
		out = append(out, SelectionMismatch{Field: "serviceAccountNames",
			Want: "one of " + strings.Join(p.sas, ", "), Have: c.ServiceAccount})
	}
	if p.all {
		return out
	}
	reqs, _ := p.selector.Requirements()
	set := labels.Set(c.Labels)
	for _, r := range reqs {
		if r.Matches(set) {
			continue
		}
		have := "no label " + r.Key()
		if v, ok := c.Labels[r.Key()]; ok {
			have = fmt.Sprintf("%s=%s", r.Key(), v)
		}
		out = append(out, SelectionMismatch{Field: "podSelector", Want: r.String(), Have: have})
	}
	return out
}
