package main

import (
	"fmt"
	"os"
	"time"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/proxy"
)

// inspectIdleTimeout closes an inspected tunnel with no request for this
// long: the proxy's idle timeout of blind tunnels (proxy.Config).
const inspectIdleTimeout = 5 * time.Minute

// inspectEngine loads --inspect-ca-cert/--inspect-ca-key and --upstream-ca
// into the engine that serves inspected tunnels; nil without a CA (rules
// with inspect: true are then refused at load). Errors name the files and
// the certificate, never key bytes.
func inspectEngine(o *runOptions, m *metrics.Metrics) (*inspect.Engine, error) {
	if o.inspectCACert == "" {
		return nil, nil
	}
	ca, err := certs.LoadCAFiles(o.inspectCACert, o.inspectCAKey, time.Now())
	if err != nil {
		return nil, fmt.Errorf("--inspect-ca-cert: %w", err)
	}
	leaves, err := inspect.NewLeaves(ca, inspect.LeafConfig{Counters: leafCounters(m)})
	if err != nil {
		return nil, fmt.Errorf("--inspect-ca-cert: %w", err)
	}
	var bundle []byte
	if o.upstreamCA != "" {
		if bundle, err = os.ReadFile(o.upstreamCA); err != nil {
			return nil, fmt.Errorf("--upstream-ca: %w", err)
		}
	}
	roots, err := inspect.UpstreamRoots(bundle)
	if err != nil {
		return nil, fmt.Errorf("--upstream-ca %s: %w", o.upstreamCA, err)
	}
	return inspect.New(inspect.Config{
		Leaves: leaves, Roots: roots, IdleTimeout: inspectIdleTimeout,
		RecordPath: proxy.HTTPPath(o.auditHTTPPath) == proxy.HTTPPathFull,
	})
}

// leafCounters are egressd_inspect_leaves_total's children, looked up
// once: a leaf cache hit then counts with one atomic add.
func leafCounters(m *metrics.Metrics) inspect.LeafCounters {
	return inspect.LeafCounters{
		Hit:    m.InspectLeaves.WithLabelValues(metrics.LeafHit),
		Minted: m.InspectLeaves.WithLabelValues(metrics.LeafMinted),
		Failed: m.InspectLeaves.WithLabelValues(metrics.LeafFailed),
	}
}
