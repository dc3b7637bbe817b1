// Package metrics owns egressd's Prometheus collectors. It is built on a
// registerer that the caller passes in (no global registry), so every test
// gets its own. No label carries a host name or a pod name: cardinality is
// bounded by the fixed sets of kinds, verdicts, reasons and rcodes.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are egressd's collectors. Packages take a non-nil *Metrics;
// tests that do not look at metrics pass New().
type Metrics struct {
	Requests       *prometheus.CounterVec   // kind, verdict, reason, probe
	DNSQueries     *prometheus.CounterVec   // verdict, rcode
	DialSeconds    *prometheus.HistogramVec // result: ok, error
	DNSSeconds     *prometheus.HistogramVec // result: ok, error, stale
	ActiveTunnels  *prometheus.GaugeVec     // kind
	BytesRelayed   *prometheus.CounterVec   // direction: sent, received
	CacheHits      prometheus.Counter
	CacheMisses    prometheus.Counter
	CacheSize      prometheus.Gauge
	Reloads        *prometheus.CounterVec // source: policy, pods, kube, inspect-ca
	ReloadErrors   *prometheus.CounterVec // source
	PolicyStale    prometheus.Gauge       // 1 while the API is lost and the last snapshot stays in force
	Identities     prometheus.Gauge
	Policies       prometheus.Gauge
	AuditWritten   prometheus.Counter
	AuditFailed    prometheus.Counter
	AuditDropped   prometheus.Counter // records lost: a sink's buffer was full, or Close gave up
	AuditAvailable prometheus.Gauge   // 1 while every audit sink takes records
	// AuditCheckpoints counts the checkpoint records written (--audit-signing-key).
	AuditCheckpoints prometheus.Counter
	UpstreamErrors   *prometheus.CounterVec // DNS upstream errors, kind: timeout, network, servfail
	InspectLeaves    *prometheus.CounterVec // inspection's leaf lookups, result: LeafHit, LeafMinted, LeafFailed
	// ResponseHeadsTooLarge counts origins' response heads over the
	// response head limit (answered 502 upstream-error), by kind of
	// record: http (plain path), inspected.
	ResponseHeadsTooLarge *prometheus.CounterVec
}

// Results of an inspected tunnel's leaf lookup: the result label of
// egressd_inspect_leaves_total.
const (
	LeafHit    = "hit"    // the cached leaf (or one a concurrent first use minted)
	LeafMinted = "minted" // a new leaf signed: first use, renewal, after eviction
	LeafFailed = "failed" // no leaf: the client's handshake fails
)

// New creates the collectors, unregistered; see Register.
func New() *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_requests_total", Help: "Proxied requests, tunnels and DNS queries by kind, verdict and reason; probe is \"true\" for requests of egressd probe, so that alerts can leave them out.",
		}, []string{"kind", "verdict", "reason", "probe"}),
		DNSQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_dns_queries_total", Help: "DNS queries answered by verdict and rcode.",
		}, []string{"verdict", "rcode"}),
		DialSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "egressd_upstream_dial_seconds", Help: "Time to connect to the destination.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"result"}),
		DNSSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "egressd_dns_upstream_seconds", Help: "Time of upstream DNS exchanges (cache misses).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"result"}),
		ActiveTunnels: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "egressd_active_tunnels", Help: "Open tunnels and connections being relayed.",
		}, []string{"kind"}),
		BytesRelayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_bytes_relayed_total", Help: "Bytes relayed; sent is client to destination.",
		}, []string{"direction"}),
		CacheHits:   prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_dns_cache_hits_total", Help: "DNS cache hits."}),
		CacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_dns_cache_misses_total", Help: "DNS cache misses."}),
		CacheSize:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "egressd_dns_cache_entries", Help: "Entries in the DNS cache."}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_reloads_total", Help: "Successful reloads of policies and identities by source.",
		}, []string{"source"}),
		ReloadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_reload_errors_total", Help: "Rejected reloads; the last good state stays in force.",
		}, []string{"source"}),
		PolicyStale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egressd_policy_source_stale", Help: "1 while the policy source is unreachable and the last snapshot stays in force.",
		}),
		Identities: prometheus.NewGauge(prometheus.GaugeOpts{Name: "egressd_identities", Help: "Source IPs that map to exactly one pod."}),
		Policies:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "egressd_policies", Help: "Policies in the snapshot in force."}),
		AuditWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "egressd_audit_records_total", Help: "Audit records taken by every sink (written, or buffered and retried).",
		}),
		AuditFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "egressd_audit_write_errors_total", Help: "Failed writes to an audit sink (the records stay buffered and are retried) and records that could not be encoded.",
		}),
		AuditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "egressd_audit_dropped_total", Help: "Audit records lost: a sink's buffer (--audit-buffer) was full, or the final flush gave up.",
		}),
		AuditCheckpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "egressd_audit_checkpoints_total", Help: "Signed checkpoint records of the audit log written (--audit-signing-key).",
		}),
		AuditAvailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egressd_audit_available", Help: "1 while every audit sink takes records; 0 while one fails, hangs or lags (with --audit-failure closed new requests are refused).",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_dns_upstream_errors_total", Help: "Failed upstream DNS exchanges by kind.",
		}, []string{"kind"}),
		InspectLeaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_inspect_leaves_total", Help: "Leaf certificates looked up for inspected tunnels' handshakes, by result: hit (cached), minted (signed by the inspection CA), failed.",
		}, []string{"result"}),
		ResponseHeadsTooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_response_heads_too_large_total", Help: "Origins' response heads (HTTP/2 header lists) over the response head limit, answered 502 upstream-error, by kind: http (plain path), inspected.",
		}, []string{"kind"}),
	}
	return m
}

// Register registers every collector on reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.DNSQueries, m.DialSeconds, m.DNSSeconds,
		m.ActiveTunnels, m.BytesRelayed, m.CacheHits, m.CacheMisses, m.CacheSize, m.Reloads,
		m.ReloadErrors, m.PolicyStale, m.Identities, m.Policies, m.AuditWritten, m.AuditFailed,
		m.AuditDropped, m.AuditAvailable, m.AuditCheckpoints, m.UpstreamErrors, m.InspectLeaves, m.ResponseHeadsTooLarge} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}
