package webhook

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a review: the result label of egressd_webhook_requests_total.
// A fixed set; no pod or namespace names are labels.
const (
	resultInjected       = "injected"
	resultUnchanged      = "unchanged"
	resultOtherNamespace = "other-namespace"
	resultIgnored        = "ignored" // not a Pod CREATE
	resultBadRequest     = "bad-request"
	resultError          = "error"
	// inject.Skip* reasons (opted-out, host-network) are results too.
)

type metrics struct {
	requests *prometheus.CounterVec
	seconds  prometheus.Histogram
	expiry   prometheus.Gauge
	reloads  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_webhook_requests_total",
			Help: "Admission reviews by result: injected, unchanged, opted-out, host-network, other-namespace, ignored (not a Pod CREATE), bad-request, error.",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "egressd_webhook_request_duration_seconds", Help: "Time to answer an admission review.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egressd_webhook_certificate_expiry_timestamp_seconds", Help: "NotAfter of the serving certificate in use (Unix seconds).",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_webhook_certificate_reloads_total", Help: "Reads of the certificate directory after a change, by result: ok, error (the last good pair stays in use).",
		}, []string{"result"}),
	}
	return m, register(reg, m.requests, m.seconds, m.expiry, m.reloads)
}

// register registers cs with reg; a nil reg registers nothing.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return nil
}
