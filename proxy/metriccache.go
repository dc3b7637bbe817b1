package proxy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/metrics"
)

// metricChildren holds the label children that every request or tunnel
// updates. WithLabelValues hashes its labels and takes the vector's lock on
// every call; the label sets here are few and fixed (kinds, verdicts,
// reasons), so each child is looked up once and kept.
type metricChildren struct {
	dialOK, dialErr prometheus.Observer
	sent, received  prometheus.Counter

	tunnels  sync.Map // kind → prometheus.Gauge
	requests sync.Map // requestLabels → prometheus.Counter
}

type requestLabels struct{ kind, verdict, reason string }

func newMetricChildren(m *metrics.Metrics) *metricChildren {
	return &metricChildren{
		dialOK:   m.DialSeconds.WithLabelValues("ok"),
		dialErr:  m.DialSeconds.WithLabelValues("error"),
		sent:     m.BytesRelayed.WithLabelValues("sent"),
		received: m.BytesRelayed.WithLabelValues("received"),
	}
}

func (mc *metricChildren) activeTunnels(m *metrics.Metrics, kind string) prometheus.Gauge {
	if g, ok := mc.tunnels.Load(kind); ok {
		return g.(prometheus.Gauge)
	}
	g, _ := mc.tunnels.LoadOrStore(kind, m.ActiveTunnels.WithLabelValues(kind))
	return g.(prometheus.Gauge)
}

func (mc *metricChildren) request(m *metrics.Metrics, kind, verdict, reason string) prometheus.Counter {
	k := requestLabels{kind, verdict, reason}
	if c, ok := mc.requests.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := mc.requests.LoadOrStore(k, m.Requests.WithLabelValues(kind, verdict, reason))
	return c.(prometheus.Counter)
}
