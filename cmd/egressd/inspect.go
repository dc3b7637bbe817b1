package main

import (
	"fmt"
	"os"
	"time"

	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/proxy"
)

// inspectEngine loads --inspect-ca-cert/--inspect-ca-key and --upstream-ca
// into the engine that serves inspected tunnels, with the per-request
// limits of pcfg (proxy.Config.Inspection); nil without a CA (rules with
// inspect: true are then refused at load). Errors name the files and the
// certificate, never key bytes.
func inspectEngine(o *runOptions, pcfg proxy.Config) (*inspect.Engine, error) {
	if o.inspectCACert == "" {
		return nil, nil
	}
	ca, err := inspect.LoadCAFiles(o.inspectCACert, o.inspectCAKey, time.Now())
	if err != nil {
		return nil, fmt.Errorf("--inspect-ca-cert: %w", err)
	}
	leaves, err := inspect.NewLeaves(ca, inspect.LeafConfig{})
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
	return inspect.New(pcfg.Inspection(inspect.Config{
		Leaves: leaves, Roots: roots,
		RecordPath: pcfg.AuditHTTPPath == proxy.HTTPPathFull,
	}))
}
