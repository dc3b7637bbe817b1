package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/suggest"
)

// suggestMain prints EgressPolicy YAML that would allow what the records
// show (docs/design.md, "Reports and verification"): exit 0, 1 when an input
// cannot be read, 2 on bad usage.
func suggestMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd suggest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: egressd suggest [flags] [FILE|DIR|-]...\n\n"+
			"Writes an EgressPolicy per workload that would allow what the records show:\n"+
			"audit-mode requests with would_deny. Hosts that enforce mode denied are\n"+
			"never suggested: they are listed in a comment. Review it, then check it\n"+
			"with egressd check.\n\n")
		fs.PrintDefaults()
	}
	namespace := fs.String("namespace", "", "only this namespace")
	fold := fs.Int("fold", 3, "fold this many sibling hosts under one registrable domain into **.<parent> (-1: never)")
	pods := fs.String("pods", "", "pods file (as egressd run --pods reads it): podSelector from the workloads' pod labels")
	guess := fs.Bool("guess-redirects", false, "purpose \"redirect target of H?\" for a host first seen within 5s after an allowed request of the same pod (a guess by timing; recorded redirects are always named)")
	var cidrs stringList
	fs.Var(&cidrs, "cidr", "private range a suggested rule may open (repeatable): hosts that resolved inside it get it in cidrs")
	inputs, code := parseWithInputs(fs, args, stderr)
	if code >= 0 {
		return code
	}
	cfg := suggest.Config{Namespace: *namespace, Fold: *fold, GuessRedirects: *guess}
	var errs []error
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("--cidr: %w", err))
			continue
		}
		cfg.CIDRs = append(cfg.CIDRs, p)
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		failf(stderr, "suggest", errors.Join(errs...))
		return 2
	}
	if *pods != "" {
		list, err := readPods([]string{*pods})
		if err != nil {
			failf(stderr, "suggest", err)
			return 1
		}
		cfg.Pods = append([]*corev1.Pod{}, list...)
	}
	if stdinIsTerminal(inputs, stdin) {
		fmt.Fprintln(stderr, "egressd suggest: no input: give FILE, DIR or - (stdin is a terminal)")
		return 2
	}
	ins, err := auditlog.Inputs(inputs, stdin)
	if err != nil {
		failf(stderr, "suggest", err)
		return 1
	}
	res, err := suggest.Build(cfg, ins)
	if err != nil {
		failf(stderr, "suggest", err)
		return 1
	}
	if err := res.WriteYAML(stdout); err != nil {
		failf(stderr, "suggest", err)
		return 1
	}
	if len(res.Policies) == 0 {
		fmt.Fprintln(stderr, "egressd suggest: nothing to suggest: no record shows a request that a rule would allow")
	}
	return 0
}
