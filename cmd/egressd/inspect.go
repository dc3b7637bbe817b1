package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/proxy"
)

// inspectEngine loads --inspect-ca-cert/--inspect-ca-key and --upstream-ca
// into the engine that serves inspected tunnels, with the per-request
// limits of pcfg (proxy.Config.Inspection) and its leaf cache (for
// watchInspectCA); nil without a CA (rules with inspect: true are then
// refused at load). Errors name the files and the certificate, never key
// bytes.
func inspectEngine(o *runOptions, pcfg proxy.Config, m *metrics.Metrics) (*inspect.Engine, *inspect.Leaves, error) {
	if o.inspectCACert == "" {
		return nil, nil, nil
	}
	ca, err := certs.LoadCAFiles(o.inspectCACert, o.inspectCAKey, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("--inspect-ca-cert: %w", err)
	}
	leaves, err := inspect.NewLeaves(ca, inspect.LeafConfig{Counters: leafCounters(m)})
	if err != nil {
		return nil, nil, fmt.Errorf("--inspect-ca-cert: %w", err)
	}
	var bundle []byte
	if o.upstreamCA != "" {
		if bundle, err = os.ReadFile(o.upstreamCA); err != nil {
			return nil, nil, fmt.Errorf("--upstream-ca: %w", err)
		}
	}
	roots, err := inspect.UpstreamRoots(bundle)
	if err != nil {
		return nil, nil, fmt.Errorf("--upstream-ca %s: %w", o.upstreamCA, err)
	}
	eng, err := inspect.New(pcfg.Inspection(inspect.Config{
		Leaves: leaves, Roots: roots,
		RecordPath: pcfg.AuditHTTPPath == proxy.HTTPPathFull,
	}))
	return eng, leaves, err
}

// watchInspectCA reloads --inspect-ca-cert/--inspect-ca-key when either
// changes (cert-manager renewing the CA, a Secret updated): a pair that
// loads signs every leaf from then on; one that does not (a half-written
// pair, an expired or mismatched key) keeps the CA in force and is logged
// and counted, as a bad policy is (source "inspect-ca"). A pair refused
// only because its validity has not begun (a renewed CA whose NotBefore
// is ahead of this clock) is tried again at every poll until it loads or
// changes, logged and counted once: unchanged files are otherwise never
// read again, and the old CA would serve until it expires. now is the
// clock.
func watchInspectCA(o *runOptions, leaves *inspect.Leaves, m *metrics.Metrics, log *slog.Logger, now func() time.Time) *watch.Watcher {
	w := &watch.Watcher{Paths: []string{o.inspectCACert, o.inspectCAKey}, Interval: o.reloadEvery}
	retrying := false
	w.OnChange = func(_ []watch.File, err error) {
		retry := retrying
		retrying = false
		var ca *certs.CA
		if err == nil {
			ca, err = certs.LoadCAFiles(o.inspectCACert, o.inspectCAKey, now())
		}
		if err != nil {
			if errors.Is(err, certs.ErrCANotYetValid) {
				retrying = true
				w.Retry()
			}
			if !retry {
				m.ReloadErrors.WithLabelValues("inspect-ca").Inc()
				log.Error("inspection CA reload rejected; the CA in force stays", "error", err.Error())
			}
			return
		}
		leaves.SetCA(ca)
		m.Reloads.WithLabelValues("inspect-ca").Inc()
		log.Info("inspection CA loaded", "subject", ca.Certificate().Subject.String(),
			"not_after", ca.Certificate().NotAfter.UTC().Format(time.RFC3339))
	}
	return w
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
