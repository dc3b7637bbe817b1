// Command egressd runs egressd's DNS server alone, built from the resolver
// and dnsserver packages directly, for the benchmark: a policy that allows **.bench.test
// to the pod at 127.0.0.1 (dnsperf's source), every query policy-checked
// and audit-logged to a file.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/dnsserver"
	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

const benchPolicy = `
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: bench, namespace: bench}
spec:
  podSelector: {}
  egress:
  - hosts: ["**.bench.test"]
    ports: [443]
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "egressd-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:5391", "DNS listen address")
	upstream := flag.String("upstream", "127.0.0.1:5390", "upstream DNS server")
	auditPath := flag.String("audit", "/dev/null", "audit file")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here until exit")
	// The rate limit runs (its cost is measured) but never refuses: dnsperf
	// is one client asking far more than a pod may.
	rate := flag.Float64("dns-rate", 1e9, "queries per second per client (dnsserver.Config.QueryRate)")
	// Issue 26's A/B: the same server with every record a leaf of a signed
	// log (egressd run's --audit-signing-key; checkpoints every 10 s).
	signingKey := flag.String("signing-key", "", "signer key (egressd keygen): records become a verifiable log")
	flag.Parse()
	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	snap, err := testutil.Snapshot(benchPolicy)
	if err != nil {
		return err
	}
	ids := identity.NewStore()
	ids.Replace([]*corev1.Pod{testutil.RunningPod("bench", "dnsperf", "", "127.0.0.1", nil)})
	af, err := os.OpenFile(*auditPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer af.Close()
	m := metrics.New()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	res, err := resolver.New(resolver.Config{Upstreams: []string{*upstream}, Metrics: m, Logger: log})
	if err != nil {
		return err
	}
	acfg := audit.Config{Writers: []io.Writer{af}, Metrics: m}
	if *signingKey != "" {
		signer, err := evidence.LoadSigner(*signingKey)
		if err != nil {
			return err
		}
		if acfg.Evidence, err = evidence.New(evidence.Config{Signer: signer, Namespace: "bench"}); err != nil {
			return err
		}
	}
	auditLog := audit.New(acfg)
	defer auditLog.Close()
	srv, err := dnsserver.New(dnsserver.Config{
		Addr:      *addr,
		Resolver:  res,
		Inputs:    admit.Inputs{Policy: func() *policy.Snapshot { return snap }, Identity: ids},
		Audit:     auditLog,
		Metrics:   m,
		Logger:    log,
		QueryRate: *rate,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return srv.Serve(ctx)
}
