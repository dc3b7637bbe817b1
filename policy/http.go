package policy

import (
	"errors"
	"fmt"
	"slices"
)

// Inspected rules (docs/design.md "Inspection"): a rule with inspect: true
// has its tunnels' TLS terminated by egressd, and each HTTP request inside
// is decided against the rule's http entries by DecideRequest.

// HTTPRule is one http entry of an inspected rule: a request is allowed
// when its method is one of Methods and its path matches one of Paths.
// Entries are additive, like rules.
type HTTPRule struct {
	// Methods in upper case ("GET", "POST"); empty means any method.
	Methods []string `json:"methods,omitempty"`
	// Paths are path patterns: an exact path, or one ending in "/*"
	// (exactly one more segment) or "/**" (one or more); empty means any
	// path.
	Paths []string `json:"paths,omitempty"`
}

// compiledHTTP is an HTTPRule compiled: nil means any.
type compiledHTTP struct {
	methods []string
	paths   []pathPattern
}

// ValidateOptions are what Validate and Compile need to know about the
// instance that will enforce the documents.
type ValidateOptions struct {
	// InspectAvailable says the instance can inspect TLS (it has an
	// inspection CA and the engine is wired); false refuses every rule
	// with inspect: true, so that egressd never claims to inspect what it
	// does not (docs/design.md: "A policy with inspect: true and no CA
	// configured is refused at load").
	InspectAvailable bool
}

// ErrInspectUnavailable marks a rule with inspect: true on an instance
// that cannot inspect (ValidateOptions.InspectAvailable false).
var ErrInspectUnavailable = errors.New("TLS inspection is not available in this egressd (it needs an inspection CA: --inspect-ca-cert and --inspect-ca-key); the policy is refused, and the previous one stays in force")

// inspect validates a rule's inspect and http fields.
func (v *validator) inspect(field string, r *EgressRule) {
	if r.Inspect && !v.opts.InspectAvailable {
		v.add(field+".inspect", "true", ErrInspectUnavailable)
	}
	if len(r.HTTP) > 0 && !r.Inspect {
		v.add(field+".http", "", errors.New("http entries need inspect: true (without inspection egressd cannot see a request's method or path)"))
	}
	if r.Inspect && len(r.Hosts) == 0 {
		v.add(field+".inspect", "true", errors.New("an address rule (cidrs, no hosts) cannot be inspected: a leaf certificate is made for a host name"))
	}
	for i, h := range r.HTTP {
		f := fmt.Sprintf("%s.http[%d]", field, i)
		if len(h.Methods) == 0 && len(h.Paths) == 0 {
			v.add(f, "", errors.New("an entry with neither methods nor paths allows everything: omit http for that"))
		}
		for j, m := range h.Methods {
			if err := checkMethod(m); err != nil {
				v.add(fmt.Sprintf("%s.methods[%d]", f, j), m, err)
			}
		}
		for j, p := range h.Paths {
			if _, err := parsePathPattern(p); err != nil {
				v.add(fmt.Sprintf("%s.paths[%d]", f, j), p, err)
			}
		}
	}
}

// checkMethod accepts an HTTP method token in upper case (RFC 9110 §9.1:
// methods are case-sensitive, and the standard ones are upper case).
func checkMethod(m string) error {
	if m == "" {
		return errors.New("empty method")
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !('A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return errors.New("a method is upper case letters, '-' or '_' (methods are case-sensitive: write GET, not get)")
		}
	}
	return nil
}

// compileHTTP compiles validated http entries.
func compileHTTP(rules []HTTPRule) ([]compiledHTTP, error) {
	out := make([]compiledHTTP, 0, len(rules))
	for _, h := range rules {
		c := compiledHTTP{methods: slices.Clone(h.Methods)}
		for _, p := range h.Paths {
			pat, err := parsePathPattern(p)
			if err != nil {
				return nil, err
			}
			c.paths = append(c.paths, pat)
		}
		out = append(out, c)
	}
	return out, nil
}

// rule returns the compiled rule d names (its policy and index), or nil.
func (s *Snapshot) rule(d Decision) *compiledRule {
	if s == nil || d.Policy == "" || d.Rule < 0 {
		return nil
	}
	pi, ok := s.polByID[d.Policy]
	if !ok {
		return nil
	}
	num := int(s.pols[pi].firstRule) + d.Rule
	if num >= len(s.rules) || s.rules[num].pol != pi {
		return nil
	}
	return &s.rules[num]
}

// Inspects reports whether the tunnel d allowed is to be inspected: d is
// an allow (not one softened by audit mode) by a rule with inspect: true.
// A tunnel that only audit mode lets through is relayed blind.
func (s *Snapshot) Inspects(d Decision) bool {
	if !d.Inspect || d.Verdict != Allow || d.WouldDeny {
		return false
	}
	r := s.rule(d)
	return r != nil && r.inspect
}

// DecideRequest returns the decision for one HTTP request inside a tunnel
// that d, the tunnel's decision, allowed: target is the request target as
// sent (origin form: path and query), method as sent. It does not edit d:
// the answer is d itself or a new Decision from d.Deny or Denied.
//
// In order: a tunnel decision that does not inspect (Inspects false) is
// returned as it is; a target CleanPath refuses is denied bad-request in
// every mode (as a malformed request is on every listener); a rule without
// http entries allows any method and path; otherwise the request is
// allowed when an entry allows both its method (methods are
// case-sensitive) and its path, and denied method-not-allowed when an
// entry's paths match and none of those allows the method, else
// path-not-allowed. Those denials are softened by audit mode like every
// other (Decision.Deny). The decision keeps the tunnel's policy and rule.
//
// It does not allocate for a target without percent escapes.
func (s *Snapshot) DecideRequest(d Decision, method, target string) Decision {
	if !s.Inspects(d) {
		return d
	}
	r := s.rule(d)
	p, err := CleanPath(target)
	if err != nil {
		return Denied(ReasonBadRequest)
	}
	if len(r.http) == 0 {
		return d
	}
	pathMatched := false
	for i := range r.http {
		h := &r.http[i]
		if !h.allowsPath(p) {
			continue
		}
		if h.methods == nil || slices.Contains(h.methods, method) {
			return d
		}
		pathMatched = true
	}
	if pathMatched {
		return d.Deny(ReasonMethodNotAllowed)
	}
	return d.Deny(ReasonPathNotAllowed)
}

// allowsPath reports whether the entry allows the cleaned path p.
func (h *compiledHTTP) allowsPath(p string) bool {
	if h.paths == nil {
		return true
	}
	for i := range h.paths {
		if h.paths[i].matches(p) {
			return true
		}
	}
	return false
}
