package auditlog

import "time"

// Record is the part of an audit record (record.Record, docs/design.md "Audit
// record") that report and suggest read: a flat, interned reading view of
// the one schema, not a second schema (TestReadViewCoversSchema fails on a
// schema member nobody decided to read or skip). Fields absent from a record keep
// their zero value; Rule is -1 when the record names no rule. Records of
// the first release lack start, event, outcome, client.uid,
// client.workload and probe: Start then falls back to Time minus
// DurationMS (as it does when the logger defaulted start to time), Event
// to "end".
//
// Strings are interned by the decoder and stay valid; ID aliases the input
// line and is valid only until the next line is read (it is hashed, never
// kept).
type Record struct {
	Time  time.Time
	Start time.Time
	Event string
	ID    []byte
	Kind  string
	// Tunnel is an inspected record's tunnel id (the tunnel's ID).
	Tunnel []byte

	Client Client

	Host      string
	Port      int
	Verdict   string
	WouldDeny bool
	Reason    string
	Policy    string
	Rule      int
	Purpose   string
	Owner     string
	Mode      string
	Probe     string

	// Answers are the DNS answers the record shows (dns.answers).
	Answers    []string
	Peer       string
	TLSResult  string
	TLSVersion string
	// TLSInspected: egressd inspected the tunnel (tls.inspected).
	TLSInspected bool
	HTTPStatus   int
	RedirectHost string

	BytesSent     int64
	BytesReceived int64
	DurationMS    float64
	Outcome       string
	// Count is the number of requests a rate-limited summary stands for;
	// zero means one.
	Count int64
	// InspectedRequests counts an inspected tunnel's HTTP requests.
	InspectedRequests int64

	// Open marks an interim record whose end record was not read: the
	// request was still open when the input was written.
	Open bool
}

// Client is who asked. Workload is empty when the record does not name it.
type Client struct {
	IP             string
	Namespace      string
	Pod            string
	ServiceAccount string
	UID            string
	Workload       Workload
}

// Workload names a pod's controller ("Deployment", "llm-server").
type Workload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String returns "Kind/Name".
func (w Workload) String() string { return w.Kind + "/" + w.Name }

// verdictDeny is policy.Deny as audit writes it (auditlog links no policy).
const verdictDeny = "deny"

// WorkloadOf returns the record's workload: client.workload when the
// record names it, otherwise the pod itself (kind Pod), since records of
// the first release carry no workload. An unknown client has none (false).
func (r *Record) WorkloadOf() (Workload, bool) {
	if r.Client.Workload.Kind != "" && r.Client.Workload.Name != "" {
		return r.Client.Workload, true
	}
	if r.Client.Pod == "" || r.Client.Namespace == "" {
		return Workload{}, false
	}
	return Workload{Kind: "Pod", Name: r.Client.Pod}, true
}

// Requests is how many requests the record stands for.
func (r *Record) Requests() int64 {
	if r.Count > 1 {
		return r.Count
	}
	return 1
}

// Class is the verdict class of the record: allow, deny or would-deny
// (allowed in audit mode, denied in enforce mode).
func (r *Record) Class() string {
	switch {
	case r.Verdict == verdictDeny:
		return ClassDeny
	case r.WouldDeny:
		return ClassWouldDeny
	default:
		return ClassAllow
	}
}

// Verdict classes of --verdict and of the graph's edges.
const (
	ClassAllow     = "allow"
	ClassDeny      = "deny"
	ClassWouldDeny = "would-deny"
)

// Unknown reports whether the record's client is no known pod.
func (r *Record) Unknown() bool {
	_, ok := r.WorkloadOf()
	return !ok || r.Reason == "unknown-client"
}
