package audit

import (
	"io"
	"testing"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// TestOutcomeMetric: egressd_outcomes_total counts every end record by
// kind and outcome where it is written (proxy, inspected and dns records
// alike); a rate-limited summary counts as the requests it stands for; an
// interim record or one without an outcome counts nothing.
func TestOutcomeMetric(t *testing.T) {
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{io.Discard}, Metrics: m})
	t.Cleanup(func() { l.Close() })
	for _, r := range []record.Record{
		{Kind: record.KindConnect, Outcome: record.OutcomeOK},
		{Kind: record.KindConnect, Outcome: record.OutcomeDialFailed},
		{Kind: record.KindConnect, Outcome: record.OutcomeDialFailed},
		{Kind: record.KindConnect, Outcome: record.OutcomeClientTLSFailed},
		{Kind: record.KindInspected, Outcome: record.OutcomeUpstreamTLSFailed},
		{Kind: record.KindDNS, Outcome: record.OutcomeResolveFailed},
		{Kind: record.KindDNS, Outcome: record.OutcomeRefused, Count: 40},
		{Kind: record.KindConnect, Outcome: record.OutcomeOK, Event: record.EventInterim},
		{Kind: record.KindHTTP},
	} {
		l.Write(&r)
	}
	for _, tc := range []struct {
		kind, outcome string
		want          float64
	}{
		{record.KindConnect, record.OutcomeOK, 1},
		{record.KindConnect, record.OutcomeDialFailed, 2},
		{record.KindConnect, record.OutcomeClientTLSFailed, 1},
		{record.KindInspected, record.OutcomeUpstreamTLSFailed, 1},
		{record.KindDNS, record.OutcomeResolveFailed, 1},
		{record.KindDNS, record.OutcomeRefused, 40},
		{record.KindHTTP, "", 0},
	} {
		if got := testCounter(m.Outcomes.WithLabelValues(tc.kind, tc.outcome)); got != tc.want {
			t.Errorf("egressd_outcomes_total{kind=%q,outcome=%q} = %v, want %v", tc.kind, tc.outcome, got, tc.want)
		}
	}
}
