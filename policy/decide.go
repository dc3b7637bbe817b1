package policy

import (
	"cmp"
	"net/netip"
)

// Client is the identity of the pod behind a source IP.
type Client struct {
	IP             netip.Addr
	Namespace      string
	Pod            string
	ServiceAccount string
	Labels         map[string]string
	// UID is the pod's metadata.uid; Workload its controller. Both are
	// recorded, neither decides.
	UID      string
	Workload Workload
	// Initialized is the pod's Initialized condition: rules with
	// phase: init match only while it is false.
	Initialized bool
}

// Workload names a pod's controller: a ReplicaSet resolved to its
// Deployment, a Job, StatefulSet, DaemonSet, or the Pod itself.
type Workload struct {
	Kind string
	Name string
}

// DecideArgs are the inputs of a decision. A struct, so that fields can be
// added without breaking callers.
type DecideArgs struct {
	// Client is the requesting pod; nil means unknown-client.
	Client *Client
	// Host is the destination: a name already normalized by NormalizeHost,
	// or an IP literal (netip.Addr.String form).
	Host string
	// Port is the destination port; zero means "any port" (the resolver asks
	// whether any rule allows the name at all).
	Port int
	// Mode is the instance's --mode: the mode of policies without
	// spec.mode, and of pods that no policy selects. Zero means enforce.
	Mode Mode
}

// Decision is the one verdict for a request. The proxy and resolver log it
// verbatim and never re-derive it.
//
// A Decision is a value: later stages of a request (the guard, the TLS and
// Host checks, the resolver's routing) never edit one; they ask for a new
// one with Deny or Because, which apply the request's mode.
type Decision struct {
	Verdict   Verdict
	Reason    Reason
	WouldDeny bool   // a denial softened by audit mode: Verdict is Allow
	Policy    string // "namespace/name" of the deciding policy (of the audit policy when softened); empty if none
	Rule      int    // index of the deciding rule in its policy; -1 if none
	// RuleName is the deciding rule's name, empty when it has none: the
	// rule's identity that inserting rules before it does not shift.
	RuleName string
	// PolicyGeneration says which version of Policy decided:
	// metadata.generation of the custom resource, or for a file a short
	// hash of the policy's content (PolicyGeneration).
	PolicyGeneration string
	Purpose          string
	Owner            string
	// Mode is the mode that applies to the client: audit when a policy in
	// audit mode selects it (or none selects it and the instance runs in
	// audit mode). Later refusals (Deny) are softened in audit mode.
	Mode Mode
	// ECH is set when the deciding rule says ech: allow.
	ECH bool
	// Inspect is set when the deciding rule says inspect: true: the one
	// field a tunnel reads before it asks Snapshot.Inspects, so that a
	// tunnel of a blind rule pays no lookup.
	Inspect bool
	// CIDRs of the deciding rule: the only non-public ranges the guard may
	// open for this request. Shared with the snapshot: do not modify.
	CIDRs []netip.Prefix
	// Credential is the deciding rule's credential (defaults applied),
	// nil if none. Shared with the snapshot: do not modify. Whether it is
	// added to a request is AddsCredential's answer.
	Credential *Credential
}

// Allowed reports whether the verdict is allow.
func (d Decision) Allowed() bool { return d.Verdict == Allow }

// Deny returns the decision for a request that d allowed and a later check
// refused with reason r (the guard's address class, sni-mismatch, ech,
// host-mismatch): a denial that keeps d's policy and rule, softened to an
// allow with WouldDeny when d's mode is audit and r is not Never(). A
// decision that is already a denial stays as it is, and so does one that
// audit mode softened unless r is Never(): enforce mode would have stopped
// at the first refusal, so a would_deny record names that one (the reason
// the same request gets in enforce mode).
func (d Decision) Deny(r Reason) Decision {
	n := d
	n.Verdict, n.Reason, n.WouldDeny = Deny, r, false
	if d.Mode == ModeAudit && !r.Never() {
		n.Verdict, n.WouldDeny = Allow, true
	}
	return d.Then(n)
}

// Then returns the decision in force when d is and a later step of the
// same request (the guard, the TLS or Host check, a revocation's new
// decision) decided next. It is the one place of the rule "keep the first
// reason enforce would give": a denial stays (enforce stopped there); a
// decision audit mode softened stays unless next is a denial (enforce
// would have stopped at d's reason first); otherwise next replaces d.
func (d Decision) Then(next Decision) Decision {
	switch {
	case d.Verdict == Deny:
		return d
	case d.WouldDeny && next.Allowed():
		return d
	}
	return next
}

// Because returns d, still allowed, with another reason: the resolver's
// routes that answer an allowed name themselves (search-expansion,
// cluster-domain). A denial stays as it is.
func (d Decision) Because(r Reason) Decision {
	if d.Verdict == Deny {
		return d
	}
	if !d.WouldDeny {
		d.Reason = r
	}
	return d
}

// Denied returns a denial with reason r and no deciding rule, for requests
// refused before any policy is consulted (bad-request, rate-limited,
// audit-unavailable, unknown-client). No mode
// softens it.
func Denied(r Reason) Decision {
	return Decision{Verdict: Deny, Reason: r, Rule: -1, Mode: ModeEnforce}
}

// AllowedBecause returns an allow with reason r and no deciding rule, for DNS
// names egressd routes without a rule (the cluster domain).
func AllowedBecause(r Reason) Decision {
	return Decision{Verdict: Allow, Reason: r, Rule: -1, Mode: ModeEnforce}
}

// Decide returns the decision for a request. It costs O(labels of the host)
// and does not allocate.
//
// In order: no client → unknown-client; a metadata name → metadata; an IP
// literal → the guard's never class first, then allowed only inside the
// cidrs of an address rule (cidrs, no hosts) of a selecting policy; a
// name not in NormalizeHost form → invalid-host; a name → allowed when a
// rule of a selecting policy matches host and port. A phase-init rule
// allows only while the client is not Initialized. Otherwise the denial
// says init-only when an init rule would have allowed, port-not-allowed
// when rules match the host (or the address) on other ports only, and
// not-allowlisted (ip-literal for an address) when none does. When several
// rules allow, the first policy by namespace/name and then the first rule
// of it decides.
//
// Modes: the never class, metadata, unknown-client and invalid-host are
// denied in every mode. Any other denial is allowed with WouldDeny when
// the client's mode is audit: a selecting policy is in audit mode (its
// spec.mode says so, or it has none and a.Mode is audit; the decision
// names the first such policy), or none selects the client and a.Mode is
// audit. An allowed decision carries the client's mode for later checks.
func (s *Snapshot) Decide(a DecideArgs) Decision {
	if a.Client == nil {
		return Denied(ReasonUnknownClient)
	}
	if IsMetadataName(a.Host) {
		return Denied(ReasonMetadata)
	}
	if looksLikeIP(a.Host) {
		return s.decideIP(a)
	}
	if !isNormalName(a.Host) {
		// Not softened in audit mode: there is no name to allow, and the
		// callers refuse a host NormalizeHost rejects in every mode too.
		return Denied(ReasonInvalidHost)
	}
	idx := s.index(a)
	if idx == nil {
		return s.deny(a, ReasonNotAllowlisted)
	}
	st := walkState{s: s, client: a.Client, port: a.Port, best: -1, lastPol: -1}
	idx.root.walk(a.Host, true, &st)
	switch {
	case st.best >= 0:
		return s.allow(a, idx, st.best)
	case st.initOnly:
		return s.deny(a, ReasonInitOnly)
	case st.matched:
		return s.deny(a, ReasonPortNotAllowed)
	}
	return s.deny(a, ReasonNotAllowlisted)
}

// Selecting returns the ids ("namespace/name") of the policies that select
// c, in order of precedence. It allocates; it is for explanations and
// events, not the request path.
func (s *Snapshot) Selecting(c *Client) []string {
	if s == nil || c == nil {
		return nil
	}
	idx := s.ns[c.Namespace]
	if idx == nil {
		return nil
	}
	var out []string
	for _, pi := range idx.pols {
		if s.pols[pi].selects(c) {
			out = append(out, s.pols[pi].id)
		}
	}
	return out
}

// modeFor returns the mode that applies to c and, when it is audit, the
// first selecting policy in audit mode (-1 when the instance's mode
// applies because no policy selects c). Policies without spec.mode have
// the instance's mode. It scans the namespace's policies only when one of
// them can be in audit mode.
func (s *Snapshot) modeFor(c *Client, def Mode) (Mode, int32) {
	if def == "" {
		def = ModeEnforce
	}
	var idx *nsIndex
	if s != nil {
		idx = s.ns[c.Namespace]
	}
	if idx == nil {
		return def, -1
	}
	if !idx.anyAudit && def == ModeEnforce {
		return ModeEnforce, -1 // no policy of the namespace can be in audit mode
	}
	selected := false
	for _, pi := range idx.pols {
		p := &s.pols[pi]
		if !p.selects(c) {
			continue
		}
		selected = true
		if m := cmp.Or(p.mode, def); m == ModeAudit {
			return ModeAudit, pi
		}
	}
	if !selected {
		return def, -1
	}
	return ModeEnforce, -1
}

// deny returns the denial with reason r for a, softened by the client's
// mode: allowed with WouldDeny, naming the audit policy, when a policy in
// audit mode selects the client (or none does and the instance is in
// audit mode). The never class is never softened.
func (s *Snapshot) deny(a DecideArgs, r Reason) Decision {
	d := Denied(r)
	if r.Never() {
		return d
	}
	mode, pi := s.modeFor(a.Client, a.Mode)
	d.Mode = mode
	if mode == ModeAudit {
		d.Verdict, d.WouldDeny = Allow, true
		if pi >= 0 {
			d.Policy, d.PolicyGeneration = s.pols[pi].id, s.pols[pi].generation
		}
	}
	return d
}

// index returns the namespace index that decides a (a name or an
// address), nil when no rule can allow it: no snapshot, a port out of
// range, no policy in the client's namespace.
func (s *Snapshot) index(a DecideArgs) *nsIndex {
	if s == nil || a.Port < 0 || a.Port > 65535 {
		return nil
	}
	return s.ns[a.Client.Namespace]
}

// decideIP decides an IP-literal destination: only a rule's cidrs open one.
func (s *Snapshot) decideIP(a DecideArgs) Decision {
	addr, err := netip.ParseAddr(a.Host)
	if err != nil {
		return Denied(ReasonInvalidHost)
	}
	if class, reason := Classify(addr); class == ClassNever {
		return Denied(reason)
	}
	idx := s.index(a)
	if idx == nil {
		return s.deny(a, ReasonIPLiteral)
	}
	addr = plain(addr)
	matched, initOnly := false, false
	// Address rules (cidrs and no hosts) are few; they are scanned in
	// order of precedence. A rule with hosts never opens an IP literal:
	// its cidrs only widen where those names may resolve.
	for _, num := range idx.cidrs {
		r := &s.rules[num]
		if !inCIDRs(r.cidrs, addr) || !s.pols[r.pol].selects(a.Client) {
			continue
		}
		if !r.allowsPort(a.Port) {
			matched = true
			continue
		}
		if r.initOnly && a.Client.Initialized {
			initOnly = true
			continue
		}
		return s.allow(a, idx, num)
	}
	switch {
	case initOnly:
		return s.deny(a, ReasonInitOnly)
	case matched:
		return s.deny(a, ReasonPortNotAllowed)
	}
	return s.deny(a, ReasonIPLiteral)
}

func (s *Snapshot) allow(a DecideArgs, idx *nsIndex, num int32) Decision {
	r := &s.rules[num]
	p := &s.pols[r.pol]
	mode := ModeEnforce
	switch {
	case p.mode == ModeAudit || p.mode == "" && a.Mode == ModeAudit:
		mode = ModeAudit
	case idx.anyAudit || a.Mode == ModeAudit && idx.anyUnset:
		// Another selecting policy may put the client in audit mode.
		mode, _ = s.modeFor(a.Client, a.Mode)
	}
	return Decision{
		Verdict: Allow,
		Reason:  ReasonAllowed,
		Policy:  p.id,
		Rule:    r.index,

		RuleName:         r.name,
		PolicyGeneration: p.generation,
		Purpose:          r.purpose,
		Owner:            r.owner,
		Mode:             mode,
		ECH:              r.ech,
		Inspect:          r.inspect,
		CIDRs:            r.cidrs,
		Credential:       r.credential,
	}
}
