package policy

// Verdict is the outcome of a decision.
type Verdict string

// Verdicts.
const (
	Allow Verdict = "allow"
	Deny  Verdict = "deny"
)

// Reason is one of a fixed, documented set of strings that say why a request
// was allowed or denied. Every audit record carries exactly one. The README
// documents each of them; add a reason here and there together.
type Reason string

// Decision reasons (from Decide and the guard).
const (
	ReasonAllowed        Reason = "allowed"          // a rule allows host and port
	ReasonNotAllowlisted Reason = "not-allowlisted"  // no rule of any selecting policy names the host
	ReasonPortNotAllowed Reason = "port-not-allowed" // a rule names the host, none on this port
	ReasonUnknownClient  Reason = "unknown-client"   // source IP is no single live pod
	ReasonInvalidHost    Reason = "invalid-host"     // the name is not a valid host name
	ReasonIPLiteral      Reason = "ip-literal"       // an IP destination outside every rule's cidrs
	ReasonMetadata       Reason = "metadata"         // a cloud metadata address or name: never
	ReasonLinkLocal      Reason = "link-local"       // 169.254.0.0/16, fe80::/10: never
	ReasonReserved       Reason = "reserved-address" // unspecified, multicast, broadcast: never
	ReasonSelf           Reason = "self"             // one of egressd's own listeners: never (no loops)
	ReasonPrivate        Reason = "private-address"  // non-public address outside the rule's cidrs
)

// Reasons set by the proxy and the resolver around a decision.
const (
	ReasonSNIMismatch      Reason = "sni-mismatch"      // CONNECT host and TLS SNI differ
	ReasonNoSNI            Reason = "no-sni"            // transparent TLS without SNI
	ReasonBadRequest       Reason = "bad-request"       // malformed or oversized request
	ReasonClusterDomain    Reason = "cluster-domain"    // DNS: forwarded to the cluster DNS
	ReasonSearchExpansion  Reason = "search-expansion"  // DNS: an allowed name with a search domain appended
	ReasonECH              Reason = "ech"               // a ClientHello with Encrypted Client Hello, no rule accepts it
	ReasonHostMismatch     Reason = "host-mismatch"     // plaintext HTTP in a CONNECT tunnel names another Host
	ReasonInitOnly         Reason = "init-only"         // the rule is phase: init and the pod is initialized
	ReasonRateLimited      Reason = "rate-limited"      // over a per-client limit (summary record with count)
	ReasonAuditUnavailable Reason = "audit-unavailable" // records cannot be written and --audit-failure is closed
	// ReasonRuleChanged: revocation of an open tunnel whose rule still
	// allows it but now asks what the tunnel cannot give (inspection it
	// lacks, no inspection, other http entries: Requirements.Change).
	ReasonRuleChanged Reason = "rule-changed"
)

// Reasons of a request inside an inspected tunnel (DecideRequest).
const (
	ReasonMethodNotAllowed Reason = "method-not-allowed" // no http entry of the rule allows the method for the path
	ReasonPathNotAllowed   Reason = "path-not-allowed"   // no http entry of the rule allows the path
	// ReasonCredentialUnavailable: the rule adds a credential egressd does
	// not hold now (its file absent or empty); refused in every mode, never
	// sent without it.
	ReasonCredentialUnavailable Reason = "credential-unavailable"
)

// Never reports whether r is denied in every mode (the guard's never class,
// unknown clients, and credential-unavailable: audit mode would otherwise
// send a request its rule means to carry a credential without it): audit
// mode does not soften it.
func (r Reason) Never() bool {
	switch r {
	case ReasonMetadata, ReasonLinkLocal, ReasonReserved, ReasonSelf, ReasonUnknownClient,
		ReasonCredentialUnavailable:
		return true
	}
	return false
}

// Mode is enforce or audit.
type Mode string

// Modes.
const (
	ModeEnforce Mode = "enforce"
	ModeAudit   Mode = "audit"
)
