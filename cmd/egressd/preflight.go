package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/netpol"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/preflight"
)

const preflightUsage = `usage: egressd preflight --namespace NS [--since D] [flags] [FILE|DIR|-]...

Says whether switching NS to enforce (with the egressd-workloads
NetworkPolicy) would deny anything that was seen. From the API server: the
running pods that NetworkPolicy would confine without proxy variables or
without egressd as their resolver, and the EgressPolicies in audit mode.
From the audit records (files, directories, - for stdin; plain, gzip or
kubectl logs --prefix output): the would-deny requests in the window per
workload and host, and the unknown clients.
Exit status: 0 safe, 1 not safe (or no record in the window), 2 usage,
API or input error.

`

// preflightMain implements `egressd preflight`.
func preflightMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, now time.Time) int {
	fs := flag.NewFlagSet("egressd preflight", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, preflightUsage)
		fs.PrintDefaults()
	}
	var (
		namespace   = fs.String("namespace", "", "namespace of egressd and its workloads (required)")
		since       = fs.String("since", "", "only records at or after this: a duration back from now (24h, 7d) or a time (2026-07-01, RFC 3339); empty: every record read")
		kubeconfig  = fs.String("kubeconfig", "", "kubeconfig file; empty: $KUBECONFIG, ~/.kube/config, then in-cluster")
		service     = fs.String("service", "egressd", "egressd's Service: its ClusterIPs are the resolver addresses a confined pod's dnsConfig must name")
		workloadSel = fs.String("workload-selector", "", "label selector of the pods the NetworkPolicy confines, when the namespace has no egressd-workloads NetworkPolicy yet; empty: every pod but egressd (the chart's default)")
		jsonOut     = fs.Bool("json", false, "write the result as JSON")
		resolvers   stringList
		policies    stringList
	)
	fs.Var(&resolvers, "resolver", "egressd's resolver address (repeatable), instead of --service's ClusterIPs")
	fs.Var(&policies, "policy", "policy file or directory (repeatable), instead of the namespace's EgressPolicies")
	inputs, code := parseWithInputs(fs, args, stderr)
	if code >= 0 {
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "egressd preflight: %v\n", err)
		return code
	}
	cfg := preflight.Config{Namespace: *namespace}
	var errs []error
	if *since != "" {
		t, err := parseWhen(*since, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("--since: %w", err))
		}
		cfg.Since = t
	}
	for _, r := range resolvers {
		a, err := netip.ParseAddr(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("--resolver %q: want an IP address", r))
			continue
		}
		cfg.Resolvers = append(cfg.Resolvers, a.String())
	}
	var confine *metav1.LabelSelector
	if *workloadSel != "" {
		sel, err := metav1.ParseToLabelSelector(*workloadSel)
		if err != nil {
			errs = append(errs, fmt.Errorf("--workload-selector: %w", err))
		}
		confine = sel
	}
	if *namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	}
	if stdinIsTerminal(inputs, stdin) {
		errs = append(errs, errors.New("no records: give FILE, DIR or - (stdin is a terminal); kubectl -n NS logs -l app.kubernetes.io/name=egressd --prefix --tail=-1 > records.log"))
	}
	if len(errs) > 0 {
		return fail(2, errors.Join(errs...))
	}

	client, err := kube.Connect(*kubeconfig)
	if err != nil {
		return fail(2, err)
	}
	nsData, err := kube.ReadNamespace(ctx, client, *namespace, *service)
	if err != nil {
		return fail(2, err)
	}
	if len(cfg.Resolvers) == 0 {
		cfg.Resolvers = nsData.ServiceIPs
	}
	switch {
	case nsData.Workloads != nil:
		cfg.Confine = &nsData.Workloads.Spec.PodSelector
	default:
		// As the chart and egressd netpol make it.
		cfg.Confine = &netpol.NetworkPolicies(netpol.Options{Namespace: *namespace, WorkloadSelector: confine})[0].Spec.PodSelector
	}
	docs := nsData.Policies
	for _, e := range nsData.Invalid {
		fmt.Fprintf(stderr, "warning: %v\n", e)
	}
	opts := policy.ValidateOptions{InspectAvailable: true}
	if len(policies) > 0 {
		// Through the one loader, as egressd check and run load them.
		files, err := watch.Read(policies)
		if err != nil {
			return fail(2, err)
		}
		snap, err := loadPolicies(files, opts)
		if err != nil {
			return fail(2, err)
		}
		docs = snap.Policies()
	} else if _, err := policy.CompileWith(docs, opts); err != nil {
		fmt.Fprintf(stderr, "warning: the namespace's EgressPolicies as a set: %v\n", err)
	}

	chk, err := preflight.New(cfg)
	if err != nil {
		return fail(2, err)
	}
	chk.Pods(nsData.Pods)
	chk.Policies(docs)
	ins, err := auditlog.Inputs(inputs, stdin)
	if err != nil {
		return fail(2, err)
	}
	rd, err := auditlog.NewReader(0)
	if err != nil {
		return fail(2, err)
	}
	m := auditlog.NewMerger(&rd.Stats, chk.Add)
	for _, in := range ins {
		if err := rd.Read(in, m.Add); err != nil {
			return fail(2, err)
		}
	}
	m.Flush()
	res := chk.Result()
	if *jsonOut {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return fail(2, err)
	}
	if rd.Stats.Skipped > 0 && rd.Stats.Records == 0 {
		fmt.Fprintf(stderr, "egressd preflight: %d lines read, none an audit record\n", rd.Stats.Skipped)
	}
	if !res.Safe {
		return 1
	}
	return 0
}
