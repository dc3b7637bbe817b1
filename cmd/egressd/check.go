package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
)

// checkMain validates and lints policies: exit 1 on an error, 0 with
// warnings printed otherwise, 2 on bad usage.
func checkMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var policies stringList
	fs.Var(&policies, "policy", "policy file or directory (repeatable)")
	pods := fs.String("pods", "", "pods file: also warn about policies that select none of its pods")
	inspect := fs.Bool("inspect", false, "validate for an egressd run with --inspect-ca-cert: accept rules with inspect: true (refused without it, as run refuses them)")
	credsDir := fs.String("credentials-dir", "", "directory of credentials, as for run: warn about rules whose credential it does not hold")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd check: %v\n", err)
		return 2
	}
	if len(policies) == 0 {
		fmt.Fprintln(stderr, "egressd check: --policy is required")
		return 2
	}
	files, err := watch.Read(policies)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	// The loader run uses, at start and on every reload: check's exit
	// code is run's accept or reject.
	snap, err := loadPolicies(files, policy.ValidateOptions{InspectAvailable: *inspect})
	var errs []error
	if err != nil {
		errs = append(errs, err)
		if !*inspect && errors.Is(err, policy.ErrInspectUnavailable) {
			errs = append(errs, errors.New("a rule has inspect: true: check it as an egressd run with --inspect-ca-cert and --inspect-ca-key loads it, with egressd check --inspect"))
		}
	}
	docs := snap.Policies()
	var clients []*policy.Client
	if *pods != "" {
		podList, err := readPods([]string{*pods})
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range podList {
			clients = append(clients, identity.ClientFor(p))
		}
	}
	var credWarnings []policy.Warning
	if *credsDir != "" && len(errs) == 0 {
		if credWarnings, err = credentialWarnings(docs, *credsDir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range errs {
		fmt.Fprintf(stderr, "error: %v\n", e)
	}
	if len(errs) > 0 {
		return 1
	}
	warnings := append(policy.Lint(docs, clients), credWarnings...)
	for _, w := range warnings {
		fmt.Fprintf(stdout, "warning: %s: %s\n", w.Origin, w.Message)
	}
	rules := 0
	for _, d := range docs {
		rules += len(d.Policy.Spec.Egress)
	}
	fmt.Fprintf(stdout, "ok: %d policies, %d rules, %d warnings\n", len(docs), rules, len(warnings))
	return 0
}
