package auditlog

import (
	"time"

	"github.com/egressd/egressd/record"
)

// Record is an audit record as report and suggest read it: the one schema,
// record.Record, as Decoder filled it (members the reader was told to skip
// stay zero), and what the reader learnt beside it.
//
// Records of the first release lack start, event, outcome, client.uid,
// client.workload and probe: the reader then sets Start to Time minus
// DurationMS (as it does when the logger defaulted start to time), and
// Event to "end" (withDefaults).
type Record struct {
	record.Record
	// Open marks an interim record whose end record was not read: the
	// request was still open when the input was written.
	Open bool
}

// Workload names a pod's controller ("Deployment", "llm-server").
type Workload = record.Workload

// withDefaults fills what records of the first release lack.
func withDefaults(r *record.Record) {
	// A record without start, or whose start the logger defaulted to its
	// time, started duration_ms before it was written.
	if r.Start.IsZero() || (r.Start.Equal(r.Time) && r.DurationMS > 0) {
		r.Start = r.Time.Add(-time.Duration(r.DurationMS * float64(time.Millisecond)))
	}
	if r.Event == "" {
		r.Event = record.EventEnd
	}
}

// verdictDeny is policy.Deny as audit writes it.
const verdictDeny = "deny"

// WorkloadOf returns the record's workload: client.workload when the
// record names it, otherwise the pod itself (kind Pod), since records of
// the first release carry no workload. An unknown client has none (false).
func (r *Record) WorkloadOf() (Workload, bool) {
	if w := r.Client.Workload; w != nil && w.Kind != "" && w.Name != "" {
		return *w, true
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
