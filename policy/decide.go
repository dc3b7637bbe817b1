package policy

import "net/netip"

// Client is the identity of the pod behind a source IP.
type Client struct {
	IP             netip.Addr
	Namespace      string
	Pod            string
	ServiceAccount string
	Labels         map[string]string
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
