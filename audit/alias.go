package audit

import "github.com/egressd/egressd/record"

// The record schema moved to package record; these names keep the callers
// building until the next (mechanical) commit renames them.
type (
	Record   = record.Record
	Client   = record.Client
	Workload = record.Workload
	DNS      = record.DNS
	TLS      = record.TLS
	HTTP     = record.HTTP
)

const (
	KindConnect          = record.KindConnect
	KindHTTP             = record.KindHTTP
	KindSNI              = record.KindSNI
	KindDNS              = record.KindDNS
	EventEnd             = record.EventEnd
	EventInterim         = record.EventInterim
	OutcomeRefused       = record.OutcomeRefused
	OutcomeOK            = record.OutcomeOK
	OutcomeResolveFailed = record.OutcomeResolveFailed
	OutcomeDialFailed    = record.OutcomeDialFailed
	OutcomeDialTimeout   = record.OutcomeDialTimeout
	OutcomeUpstreamError = record.OutcomeUpstreamError
	OutcomeRevoked       = record.OutcomeRevoked
	OutcomeDrained       = record.OutcomeDrained
	OutcomeIdleTimeout   = record.OutcomeIdleTimeout
)
