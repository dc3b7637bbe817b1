package admit

import (
	"fmt"

	"github.com/egressd/egressd/policy"
)

// MaxHostLen bounds a host as it is kept when it failed normalization
// (or before it): a DNS name's length limit (RFC 1035 §2.3.4).
const MaxHostLen = 253

// Request is what an entry asks to admit. A struct, so that fields can be
// added without breaking callers.
type Request struct {
	// Client is Identify's answer for the source; nil means unknown.
	Client *policy.Client
	// Host is the destination as the client named it (CONNECT target,
	// URL or Host field, SNI); Admit normalizes it.
	Host string
	// Port is the destination port, 1-65535.
	Port int
	// AnyPort asks about the name on any port (a DNS question, `explain
	// --kind dns`): Port must be zero and is not checked.
	AnyPort bool
}

// Admission is the answer of the steps before any lookup.
type Admission struct {
	// Host is the normalized destination, or the raw one (at most 253
	// bytes) when it failed normalization: what the record shows. For
	// AnyPort, the name as asked, lower case without the trailing dot.
	Host string
	// Decision is the decision; a denial ends the request.
	Decision policy.Decision
	// Err says why a denial came before Decide: ErrAuditUnavailable,
	// NormalizeHost's error (invalid-host) or ErrPort (bad-request); nil
	// otherwise.
	Err error
	// DNSAnswer says, for AnyPort, where the question is answered.
	DNSAnswer DNSAnswer
}

// Admit runs the steps before the lookup, in run's order: an unknown
// client is refused first, in every mode; while records cannot be written
// nothing is served; then the host as NormalizeHost gives it
// (invalid-host), the port (bad-request) and Snapshot.Decide with the
// instance's mode (metadata names first, before any lookup). A DNS
// question (AnyPort) is decided on the name as asked instead (name.go):
// metadata names, the cluster's own names and search-list expansions
// before the policy.
func (p *Pipeline) Admit(r Request) Admission {
	if r.AnyPort {
		return p.admitName(r)
	}
	host, herr := policy.NormalizeHost(r.Host)
	a := Admission{Host: host}
	if herr != nil {
		a.Host = RecordedHost(r.Host)
	}
	if a.Decision, a.Err = p.gate(r.Client); a.Err != nil || r.Client == nil {
		return a
	}
	switch {
	case herr != nil || host == "":
		a.Decision, a.Err = policy.Denied(policy.ReasonInvalidHost), herr
	case r.Port < 1 || r.Port > 65535:
		a.Decision, a.Err = policy.Denied(policy.ReasonBadRequest), fmt.Errorf("%w: %d", ErrPort, r.Port)
	default:
		a.Decision = p.decide(p.cfg.Policy(), r.Client, host, r.Port)
	}
	return a
}

// gate is the first step of every admission: an unknown client
// (unknown-client), then audit availability (ErrAuditUnavailable). A
// known client while records can be written gets the zero Decision and no
// error: the caller goes on.
func (p *Pipeline) gate(c *policy.Client) (policy.Decision, error) {
	switch {
	case c == nil:
		return policy.Denied(policy.ReasonUnknownClient), nil
	case p.cfg.AuditAvailable != nil && !p.cfg.AuditAvailable():
		return policy.Denied(policy.ReasonAuditUnavailable), ErrAuditUnavailable
	}
	return policy.Decision{}, nil
}

// decide is the policy step of Admit and Redecide.
func (p *Pipeline) decide(snap *policy.Snapshot, c *policy.Client, host string, port int) policy.Decision {
	return snap.Decide(policy.DecideArgs{Client: c, Host: host, Port: port, Mode: p.cfg.Mode})
}

// RecordedHost is s as a record keeps a host that failed normalization,
// or that was not normalized yet: at most MaxHostLen bytes. The proxy and
// the DNS server record such hosts alike.
func RecordedHost(s string) string {
	if len(s) > MaxHostLen {
		return s[:MaxHostLen]
	}
	return s
}
