package policy

import "net/netip"

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
}

// Decision is the one verdict for a request. The proxy and resolver log it
// verbatim and never re-derive it.
type Decision struct {
	Verdict   Verdict
	Reason    Reason
	WouldDeny bool   // set by InMode(ModeAudit) on a softened denial
	Policy    string // "namespace/name" of the deciding policy; empty if none
	Rule      int    // index of the deciding rule in its policy; -1 if none
	Purpose   string
	Owner     string
	// CIDRs of the deciding rule: the only non-public ranges the guard may
	// open for this request. Shared with the snapshot: do not modify.
	CIDRs []netip.Prefix
}

// Allowed reports whether the verdict is allow.
func (d Decision) Allowed() bool { return d.Verdict == Allow }

// InMode applies the mode: in audit mode a denial whose reason is not
// Never() becomes an allow with WouldDeny set.
func (d Decision) InMode(m Mode) Decision {
	if m == ModeAudit && d.Verdict == Deny && !d.Reason.Never() {
		d.Verdict = Allow
		d.WouldDeny = true
	}
	return d
}

// Denied returns a denial with reason r and no deciding rule.
func Denied(r Reason) Decision { return Decision{Verdict: Deny, Reason: r, Rule: -1} }

// Decide returns the decision for a request. It costs O(labels of the host)
// and does not allocate.
//
// In order: no client → unknown-client; a metadata name → metadata; an IP
// literal → the guard's never class first, then allowed only inside the
// cidrs of a rule of a selecting policy (port-not-allowed when only the
// port differs, ip-literal otherwise); a name not in NormalizeHost form →
// invalid-host; a name → allowed when a rule of a selecting policy matches
// host and port, port-not-allowed when rules match the host only,
// not-allowlisted otherwise. When several rules allow, the first policy by
// namespace/name and then the first rule of it decides.
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
		return Denied(ReasonInvalidHost)
	}
	if s == nil || a.Port < 0 || a.Port > 65535 {
		return Denied(ReasonNotAllowlisted)
	}
	idx := s.ns[a.Client.Namespace]
	if idx == nil {
		return Denied(ReasonNotAllowlisted)
	}
	st := walkState{s: s, client: a.Client, port: a.Port, best: -1, lastPol: -1}
	idx.root.walk(a.Host, true, &st)
	switch {
	case st.best >= 0:
		return s.allow(st.best)
	case st.matched:
		return Denied(ReasonPortNotAllowed)
	}
	return Denied(ReasonNotAllowlisted)
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
	if s == nil || a.Port < 0 || a.Port > 65535 {
		return Denied(ReasonIPLiteral)
	}
	idx := s.ns[a.Client.Namespace]
	if idx == nil {
		return Denied(ReasonIPLiteral)
	}
	addr = plain(addr)
	matched := false
	// Rules with cidrs are few; they are scanned in order of precedence.
	for _, num := range idx.cidrs {
		r := &s.rules[num]
		if !inCIDRs(r.cidrs, addr) || !s.pols[r.pol].selects(a.Client) {
			continue
		}
		if r.allowsPort(a.Port) {
			return s.allow(num)
		}
		matched = true
	}
	if matched {
		return Denied(ReasonPortNotAllowed)
	}
	return Denied(ReasonIPLiteral)
}

func (s *Snapshot) allow(num int32) Decision {
	r := &s.rules[num]
	return Decision{
		Verdict: Allow,
		Reason:  ReasonAllowed,
		Policy:  s.pols[r.pol].id,
		Rule:    r.index,
		Purpose: r.purpose,
		Owner:   r.owner,
		CIDRs:   r.cidrs,
	}
}
