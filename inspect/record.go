package inspect

import (
	"net/url"
	"strings"
	"time"

	"github.com/egressd/egressd/internal/http1"
)

// Request is what the engine asks Decide about, for one HTTP request.
type Request struct {
	Method string
	// Target is the request target as sent, in origin form ("/v1/x?q");
	// an absolute-form target is cut to its path and query. For
	// policy.Snapshot.DecideRequest.
	Target string
	// Authority is the Host field (HTTP/1.1) or :authority (HTTP/2).
	Authority string
	// HostMismatch: Authority (or another Host field) does not name the
	// tunnel's host and port. Decide answers host-mismatch for it (by
	// policy.Decision.Deny, so that audit mode softens it as on the
	// plain-HTTP path).
	HostMismatch bool
	Proto        string // "HTTP/1.1" or "HTTP/2.0"
}

// Verdict is Decide's answer: Allow, or a refusal with its reason (sent as
// X-Egressd-Reason with a 403). Reason is recorded either way; Decision,
// of the caller's type D, is opaque to the engine and handed back in the
// ExchangeRecord (the proxy's policy.Decision, for its record): the zero D for
// a request refused before it was decided.
type Verdict[D any] struct {
	Allow    bool
	Reason   string
	Decision D
	// Status is a refusal's status; zero means 403 (503 for a credential
	// that is unavailable, docs/design.md "Credentials").
	Status int
	// SetHeader, when not "", is a field (canonical form) the engine sets
	// on an allowed request before it forwards it, replacing any value the
	// client sent, to SetValue (one value; shared, never modified): the
	// credential of the deciding rule. The engine drops SetValue before
	// the ExchangeRecord is recorded.
	SetHeader string
	SetValue  []string
}

// ExchangeRecord is the record of one HTTP exchange inside an inspected tunnel
// (a record of kind inspected). It never holds bodies, header values,
// credentials or query strings.
type ExchangeRecord[D any] struct {
	Start    time.Time
	Duration time.Duration
	Method   string
	// Path is the request's path without the query, only when
	// Config.RecordPath (--audit-http-path full); else "".
	Path  string
	Proto string
	// Status is the origin's status, or egressd's own (403 refused, 400
	// malformed, 502 upstream failure).
	Status int
	// RedirectHost is, for a 3xx with Location, the host the client is
	// sent to (lower case, no port, no userinfo); the tunnel's own host
	// when Location is relative.
	RedirectHost string
	// RedirectAmbiguous: RFC 3986 parsing reads Location as another host
	// than RedirectHost, the one WHATWG parsing (browsers) follows
	// (http1.RedirectHost).
	RedirectAmbiguous bool
	// BytesReceived and BytesSent count body bytes from the client and
	// to the client.
	BytesReceived, BytesSent int64
	Verdict                  Verdict[D]
	// Error says what failed upstream or on the client's side; "" if
	// nothing did.
	Error string
	// HeadTooLarge: the origin's response head was over
	// Config.MaxResponseHeadBytes (Status 502, Error says
	// http1.ErrResponseHeadTooLarge).
	HeadTooLarge bool
	// Idle: the response moved no byte either way for Config.IdleTimeout
	// and was cut (outcome idle-timeout, as on the plain-HTTP path).
	Idle bool
	// Replaced: the client sent a value of Verdict.SetHeader, replaced
	// (http.credential_replaced).
	Replaced bool
}

// OriginCert is the origin certificate's identity, for tls.origin_cert.
type OriginCert struct {
	Subject  string
	Issuer   string
	NotAfter time.Time
}

// Outcomes of an inspected tunnel (Tunnel.Outcome).
const (
	OutcomeOK                = "ok"
	OutcomeUpstreamTLSFailed = "upstream-tls-failed"
	OutcomeClientTLSFailed   = "client-tls-failed" // the client's handshake with the leaf failed
	OutcomeRefused           = "refused"           // SNI mismatch or ECH
)

// Tunnel is the record of one inspected tunnel, for the tunnel's own
// record (tls.inspected, tls.origin_cert, requests).
type Tunnel struct {
	Inspected bool
	ALPN      string // the protocol both sides speak: "h2", "http/1.1" or ""
	Origin    OriginCert
	Requests  int64
	Outcome   string
	// VerifyError is the class of the origin's verification failure
	// (upstream-tls-failed): unknown-authority, expired, not-yet-valid,
	// hostname-mismatch, alert:<name>, handshake.
	VerifyError string
}

// redirectHost returns the host a Location value sends the client to,
// resolved against the tunnel's host as a browser-grade client resolves
// it, and whether RFC 3986 parsing reads another (http1.RedirectHost).
func redirectHost(location, host string) (string, bool) {
	return http1.RedirectHost(&url.URL{Scheme: "https", Host: host, Path: "/"}, location)
}

// recordPath returns the path of target for the record: the query cut.
func recordPath(target string) string {
	if i := strings.IndexByte(target, '?'); i >= 0 {
		return target[:i]
	}
	return target
}
