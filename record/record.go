package record

import (
	"time"
)

// Kinds of record.
const (
	KindConnect = "connect"
	KindHTTP    = "http"
	KindSNI     = "sni"
	KindDNS     = "dns"
	// KindInspected is one HTTP exchange inside an inspected tunnel; its
	// Tunnel names the tunnel's record.
	KindInspected = "inspected"
	// KindCheckpoint is a signed checkpoint of the process's log
	// (--audit-signing-key; docs/design.md, "Verifiable records"): a record,
	// but not of a request; readers of requests skip it.
	KindCheckpoint = "checkpoint"
	// KindGap says that a sink dropped records (--audit-failure open, its
	// buffer full; docs/design.md, "Records in a log engine"): a record,
	// but not of a request; readers of requests skip it.
	KindGap = "gap"
)

// Client is who asked.
type Client struct {
	IP             string `json:"ip"`
	Namespace      string `json:"namespace,omitempty"`
	Pod            string `json:"pod,omitempty"`
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// UID is the pod's metadata.uid.
	UID string `json:"uid,omitempty"`
	// Workload is the pod's controller: a ReplicaSet resolved to its
	// Deployment, a Job, StatefulSet or DaemonSet, or the Pod itself.
	Workload *Workload `json:"workload,omitempty"`
}

// Workload names a pod's controller, as in {"kind":"Deployment","name":"llm-server"}.
type Workload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String returns "Kind/Name".
func (w Workload) String() string { return w.Kind + "/" + w.Name }

// Events of a record: exactly one end record per request; interim records
// (same id) for requests still open after the interim interval.
const (
	EventEnd     = "end"
	EventInterim = "interim"
)

// Outcomes: what happened after the decision (docs/design.md, "Audit record").
// They never change verdict or reason.
const (
	OutcomeRefused       = "refused"        // the decision denied the request
	OutcomeOK            = "ok"             // served (a tunnel or exchange that ran to its end)
	OutcomeResolveFailed = "resolve-failed" // the name had no usable address
	OutcomeDialFailed    = "dial-failed"    // every permitted address refused the connection
	OutcomeDialTimeout   = "dial-timeout"   // a connect timed out and none succeeded
	OutcomeUpstreamError = "upstream-error" // the upstream failed after the connection was made
	OutcomeRevoked       = "revoked"        // a policy or identity change cut it
	OutcomeDrained       = "drained"        // cut at the drain deadline of a shutdown
	OutcomeIdleTimeout   = "idle-timeout"   // no byte either way for the idle timeout
	// OutcomeUpstreamTLSFailed: an inspected tunnel's origin failed TLS
	// verification (the class in error); the client was never presented it.
	OutcomeUpstreamTLSFailed = "upstream-tls-failed"
	// OutcomeClientTLSFailed: the client's handshake with egressd's leaf
	// failed in an inspected tunnel (most often: the client does not
	// trust the inspection CA).
	OutcomeClientTLSFailed = "client-tls-failed"
)

// DNS is a lookup as the record shows it: for proxied requests the proxy's
// own lookup, for dns records the answer given.
type DNS struct {
	Answers []string `json:"answers"`
	CNAMEs  []string `json:"cnames,omitempty"`
	TTL     uint32   `json:"ttl"`
	Rcode   string   `json:"rcode"`
	MS      float64  `json:"ms"`
	Cached  bool     `json:"cached"`
	// Stale marks an answer served from an expired cache entry because every
	// upstream failed (RFC 8767).
	Stale bool `json:"stale,omitempty"`
	// Upstream is the server that answered, when one did.
	Upstream string `json:"upstream,omitempty"`
}

// TLS is what was seen of a TLS handshake passing through a tunnel.
type TLS struct {
	SNI     string `json:"sni,omitempty"`
	Version string `json:"version,omitempty"`
	Cipher  string `json:"cipher,omitempty"`
	ALPN    string `json:"alpn,omitempty"`
	// ClientALPN is what the client offered.
	ClientALPN []string `json:"client_alpn,omitempty"`
	// Result is established, alert:<name>, no-server-hello or not-tls.
	Result string `json:"result"`
	// ECH marks a ClientHello that carried the encrypted_client_hello
	// extension.
	ECH bool `json:"ech,omitempty"`
	// Inspected marks a tunnel egressd terminated (a rule with inspect:
	// true); OriginCert is then the origin's certificate.
	Inspected  bool        `json:"inspected,omitempty"`
	OriginCert *OriginCert `json:"origin_cert,omitempty"`
}

// OriginCert names an inspected tunnel's origin certificate.
type OriginCert struct {
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"not_after"`
}

// HTTP is the visible part of a plain HTTP exchange.
type HTTP struct {
	Method       string `json:"method"`
	Path         string `json:"path,omitempty"` // without query string
	Status       int    `json:"status,omitempty"`
	RedirectHost string `json:"redirect_host,omitempty"`
	// RedirectAmbiguous: Location reads as another host to RFC 3986
	// parsers (Go, curl) than RedirectHost, the host WHATWG parsing
	// (browsers, fetch) follows; suggest opens no rule for it.
	RedirectAmbiguous bool `json:"redirect_ambiguous,omitempty"`
	// Proto is the request's protocol inside an inspected tunnel
	// ("HTTP/1.1", "HTTP/2.0").
	Proto string `json:"proto,omitempty"`
	// Credential names the credential egressd added to the request (or
	// lacked: reason credential-unavailable), never its value
	// (docs/design.md "Credentials").
	Credential string `json:"credential,omitempty"`
	// CredentialReplaced: the client sent a value of the credential's
	// header, replaced by egressd's.
	CredentialReplaced bool `json:"credential_replaced,omitempty"`
}

// Record is one audit record: one per proxied request, tunnel and DNS query,
// allowed or denied. Fields follow docs/design.md, "Audit record". Secrets never
// go in: callers fill Path, RedirectHost and Error through Redact* helpers.
type Record struct {
	Time time.Time `json:"time"`
	// Start is when the request arrived; Time is when the record was written.
	Start time.Time `json:"start"`
	// Event is EventEnd or EventInterim.
	Event string `json:"event,omitempty"`
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	// Tunnel is, on an inspected record, the id of its tunnel's record.
	Tunnel    string `json:"tunnel,omitempty"`
	Client    Client `json:"client"`
	Host      string `json:"host"`
	Port      int    `json:"port,omitempty"`
	QType     string `json:"qtype,omitempty"`
	Verdict   string `json:"verdict"`
	WouldDeny bool   `json:"would_deny"`
	Reason    string `json:"reason"`
	Policy    string `json:"policy,omitempty"`
	Rule      *int   `json:"rule,omitempty"`
	// RuleName and PolicyGeneration: policy.Decision's.
	RuleName         string `json:"rule_name,omitempty"`
	PolicyGeneration string `json:"policy_generation,omitempty"`
	Purpose          string `json:"purpose,omitempty"`
	Owner            string `json:"owner,omitempty"`
	Mode             string `json:"mode,omitempty"`
	// Probe is the Egressd-Probe name of a request made by egressd probe.
	Probe string `json:"probe,omitempty"`
	DNS   *DNS   `json:"dns,omitempty"`
	Peer  string `json:"peer,omitempty"`
	TLS   *TLS   `json:"tls,omitempty"`
	HTTP  *HTTP  `json:"http,omitempty"`
	// BytesSent counts bytes from the client towards the destination,
	// BytesReceived bytes from the destination back to the client.
	BytesSent     int64   `json:"bytes_sent"`
	BytesReceived int64   `json:"bytes_received"`
	DurationMS    float64 `json:"duration_ms"`
	// Outcome is what happened after the decision (Outcome* constants).
	Outcome string `json:"outcome,omitempty"`
	// Count is the number of requests a rate-limited summary record stands for.
	Count int64 `json:"count,omitempty"`
	// Requests counts the HTTP requests of an inspected tunnel.
	Requests int64  `json:"requests,omitempty"`
	Error    string `json:"error,omitempty"`
}
