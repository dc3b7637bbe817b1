package proxy

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// metricChildren holds the label children that every request or tunnel
// updates. WithLabelValues hashes its labels and takes the vector's lock on
// every call; the label sets here are few and fixed (kinds, verdicts,
// reasons), so each child is looked up once and kept.
type metricChildren struct {
	dialOK, dialErr prometheus.Observer
	sent, received  prometheus.Counter

	tunnels  *metrics.Children[string, prometheus.Gauge]          // by kind
	requests *metrics.Children[requestLabels, prometheus.Counter] // egressd_requests_total
}

// requestLabels are the labels of egressd_requests_total; probe marks a
// request of egressd probe.
type requestLabels struct {
	kind, verdict, reason string
	probe                 bool
}

func newMetricChildren(m *metrics.Metrics) *metricChildren {
	return &metricChildren{
		dialOK:   m.DialSeconds.WithLabelValues("ok"),
		dialErr:  m.DialSeconds.WithLabelValues("error"),
		sent:     m.BytesRelayed.WithLabelValues("sent"),
		received: m.BytesRelayed.WithLabelValues("received"),
		tunnels: metrics.NewChildren(func(kind string) prometheus.Gauge {
			return m.ActiveTunnels.WithLabelValues(kind)
		}),
		requests: metrics.NewChildren(func(k requestLabels) prometheus.Counter {
			return m.Requests.WithLabelValues(k.kind, k.verdict, k.reason, strconv.FormatBool(k.probe))
		}),
	}
}

// countRequest counts r, about to be written, in egressd_requests_total:
// a record of egressd probe (r.Probe) with probe="true". Every request,
// tunnel and inspected exchange is counted here.
func (mc *metricChildren) countRequest(r *record.Record) {
	mc.requests.Get(requestLabels{r.Kind, r.Verdict, r.Reason, r.Probe != ""}).Inc()
}
