package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/report"
)

// reportMain prints a report of audit records (docs/design.md, "Reports and
// verification"): exit 0, 1 when an input or a policy cannot be read, 2 on
// bad usage.
func reportMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, now time.Time) int {
	fs := flag.NewFlagSet("egressd report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: egressd report [flags] [FILE|DIR|-]...\n\n"+
			"Reads audit records (plain or gzip files, every file of a directory, stdin,\n"+
			"kubectl logs --prefix output), merges replicas by id and prints a report.\n\n")
		fs.PrintDefaults()
	}
	format := fs.String("format", "table", "table, json, csv, markdown, dot or html; or ocsf: one OCSF 1.3 event per request instead of a report")
	since := fs.String("since", "", "only requests open at or after this: a duration back from now (24h, 7d) or a time (2026-07-01, RFC 3339)")
	until := fs.String("until", "", "only requests that started at or before this: a time, or a duration back from now")
	namespace := fs.String("namespace", "", "only this namespace (unknown clients stay listed)")
	workload := fs.String("workload", "", "only this workload, KIND/NAME (Deployment/llm-server)")
	verdict := fs.String("verdict", "", "only allow, deny or would-deny")
	probes := fs.Bool("probes", false, "count the records of egressd probe too (left out by default)")
	var policies stringList
	fs.Var(&policies, "policy", "policy file or directory (repeatable): list its rules that matched nothing")
	useKube := fs.Bool("kube", false, "read the EgressPolicies of --namespace from the Kubernetes API: list rules that matched nothing")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for --kube (default: in-cluster)")
	from := fs.String("from", "", "read the records from a log engine instead of files: its base URL (VictoriaLogs, http://HOST:9428)")
	inputs, code := parseWithInputs(fs, args, stderr)
	if code >= 0 {
		return code
	}
	cfg := report.Config{Namespace: *namespace, Verdict: *verdict, Probes: *probes}
	var errs []error
	if !report.ValidFormat(*format) && *format != report.FormatOCSF {
		errs = append(errs, fmt.Errorf("--format %q: want one of %s", *format, strings.Join(report.Formats, ", ")))
	}
	var err error
	if *since != "" {
		if cfg.Since, err = parseWhen(*since, now); err != nil {
			errs = append(errs, fmt.Errorf("--since: %w", err))
		}
	}
	if *until != "" {
		if cfg.Until, err = parseWhen(*until, now); err != nil {
			errs = append(errs, fmt.Errorf("--until: %w", err))
		}
	}
	if *workload != "" {
		if cfg.Workload, err = report.ParseWorkload(*workload); err != nil {
			errs = append(errs, err)
		}
	}
	if *useKube && len(policies) > 0 {
		errs = append(errs, errors.New("--kube and --policy: give one"))
	}
	if *useKube && *namespace == "" {
		errs = append(errs, errors.New("--kube needs --namespace"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if *from != "" && len(inputs) > 0 {
		errs = append(errs, errors.New("--from reads a log engine: give it or FILE|DIR|-, not both"))
	}
	if len(errs) > 0 {
		failf(stderr, "report", errors.Join(errs...))
		return 2
	}
	switch {
	case len(policies) > 0:
		files, err := watch.Read(policies)
		var snap *policy.Snapshot
		if err == nil {
			// Every policy, inspecting ones included: report reads records
			// of any instance.
			snap, err = loadPolicies(files, policy.ValidateOptions{InspectAvailable: true})
			cfg.Policies = snap.Policies()
		}
		if err != nil {
			failf(stderr, "report", err)
			return 1
		}
		if cfg.Policies == nil {
			cfg.Policies = []policy.Document{}
		}
	case *useKube:
		if cfg.Policies, err = kubePolicies(ctx, *kubeconfig, *namespace); err != nil {
			failf(stderr, "report", err)
			return 1
		}
	}
	var ins []auditlog.Input
	if *from != "" {
		ins, err = engineInputs(ctx, *from, auditlog.Query{Since: cfg.Since, Namespace: cfg.Namespace, Workload: cfg.Workload})
	} else {
		if stdinIsTerminal(inputs, stdin) {
			fmt.Fprintln(stderr, "egressd report: no input: give FILE, DIR or - (stdin is a terminal)")
			return 2
		}
		ins, err = auditlog.Inputs(inputs, stdin)
	}
	if err != nil {
		failf(stderr, "report", err)
		return 1
	}
	if *format == report.FormatOCSF {
		if _, err := report.WriteOCSF(stdout, cfg, ins); err != nil {
			failf(stderr, "report", err)
			return 1
		}
		return 0
	}
	rep, err := report.Build(cfg, ins)
	if err != nil {
		failf(stderr, "report", err)
		return 1
	}
	if n := rep.Input.Unreadable(); n > 0 {
		fmt.Fprintf(stderr, "egressd report: %d of %d lines were not audit records (skipped)\n", n, rep.Input.Lines)
	}
	if err := rep.Input.Check(); err != nil {
		failf(stderr, "report", err)
		return 1
	}
	if err := report.Render(stdout, rep, *format); err != nil {
		failf(stderr, "report", err)
		return 1
	}
	return 0
}

// kubePolicies lists the EgressPolicies of namespace ns.
func kubePolicies(ctx context.Context, kubeconfig, ns string) ([]policy.Document, error) {
	client, err := kube.Connect(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	list, err := client.EgressPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("--kube: list EgressPolicies of %s: %w", ns, err)
	}
	docs := []policy.Document{}
	for _, u := range list.Items {
		var ep policy.EgressPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
			return nil, fmt.Errorf("--kube: EgressPolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		docs = append(docs, policy.Document{Origin: "EgressPolicy " + u.GetNamespace() + "/" + u.GetName(), Policy: ep})
	}
	return docs, nil
}

// parseWhen reads a point in time: a duration back from now ("90m",
// "24h", "7d") or a time ("2026-07-01", "2026-07-01T10:00:00Z").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration back from now is positive", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration (24h, 7d) or a time (2026-07-01, 2026-07-01T10:00:00Z)", s)
}

// parseWithInputs parses flags that may stand before, between and after
// the input arguments ("egressd report a.log --format html b.log"), then
// fills flags not given from the environment (parseFlags). It returns the
// inputs, and an exit code >= 0 when the command should end.
func parseWithInputs(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, int) {
	var flagArgs, inputs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			inputs = append(inputs, args[i+1:]...)
			i = len(args)
		case a == "-" || !strings.HasPrefix(a, "-"):
			inputs = append(inputs, a)
		default:
			flagArgs = append(flagArgs, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			f := fs.Lookup(name)
			if f == nil || hasValue {
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				i++
				flagArgs = append(flagArgs, args[i])
			}
		}
	}
	if err := parseFlags(fs, flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return nil, 2
	}
	return inputs, -1
}

// stdinIsTerminal reports whether the command would wait for records
// typed on a terminal: no input argument, and stdin is one.
func stdinIsTerminal(inputs []string, stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if len(inputs) > 0 || !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// engineInputs is the one input of --from: the log engine's answer to q,
// streamed.
func engineInputs(ctx context.Context, from string, q auditlog.Query) ([]auditlog.Input, error) {
	eng, err := auditlog.NewVictoriaLogs(from, nil)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	return []auditlog.Input{auditlog.EngineInput(ctx, eng, q)}, nil
}
