package audit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// outcomes are the children of egressd_outcomes_total, by kind and
// outcome.
type outcomes = *metrics.Children[[2]string, prometheus.Counter]

func newOutcomes(m *metrics.Metrics) outcomes {
	return metrics.NewChildren(func(k [2]string) prometheus.Counter {
		return m.Outcomes.WithLabelValues(k[0], k[1])
	})
}

// complete fills what r lacks (time, start, event, id, DNS answers as an
// empty list) and counts its outcome: Write's first step.
func (l *Logger) complete(r *record.Record) {
	if r.Time.IsZero() {
		r.Time = l.cfg.Now()
	}
	if r.Start.IsZero() {
		r.Start = r.Time
	}
	if r.Event == "" {
		r.Event = record.EventEnd
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.DNS != nil && r.DNS.Answers == nil {
		r.DNS.Answers = []string{}
	}
	l.countOutcome(r)
}

// countOutcome counts r's outcome in egressd_outcomes_total: here, where
// every end record of every kind (proxy, inspected, dns) passes, whether
// or not a sink takes it; a rate-limited summary counts as the requests it
// stands for. Interim records count nothing (their request is not over).
func (l *Logger) countOutcome(r *record.Record) {
	if r.Event != record.EventEnd || r.Outcome == "" {
		return
	}
	l.outcomes.Get([2]string{r.Kind, r.Outcome}).Add(float64(max(r.Count, 1)))
}
