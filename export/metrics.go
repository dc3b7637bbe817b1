package export

import (
	"github.com/prometheus/client_golang/prometheus"
)

// exportMetrics are the egressd_audit_export_* metrics.
type exportMetrics struct {
	queued, sent, retried, dropped prometheus.Counter
	spoolBytes, oldestAge          prometheus.GaugeFunc
}

func newMetrics(x *Exporter) *exportMetrics {
	return &exportMetrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_audit_export_queued_total",
			Help: "Audit records taken into the export spool."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_audit_export_sent_total",
			Help: "Audit records the log engine acknowledged (a record sent again after a restart counts again)."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_audit_export_retried_total",
			Help: "Audit records in requests that failed and are retried."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "egressd_audit_export_dropped_total",
			Help: "Audit records the exporter lost: unacknowledged at shutdown with no --audit-spool. Records refused by a full spool are egressd_audit_dropped_total."}),
		spoolBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "egressd_audit_export_spool_bytes",
			Help: "Bytes of audit records in the spool, not yet acknowledged by the log engine."},
			func() float64 { b, _ := x.spool.state(); return float64(b) }),
		oldestAge: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "egressd_audit_export_oldest_unsent_seconds",
			Help: "Age of the oldest audit record the log engine has not acknowledged; 0 when none."},
			func() float64 {
				_, t := x.spool.state()
				if t.IsZero() {
					return 0
				}
				return x.cfg.Now().Sub(t).Seconds()
			}),
	}
}

func (m *exportMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.queued, m.sent, m.retried, m.dropped, m.spoolBytes, m.oldestAge} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
