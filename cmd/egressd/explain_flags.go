package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressd/egressd/explain"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// explainOptions are the flags of `egressd explain`: the request (package
// explain's Options) and where its inputs are read from.
type explainOptions struct {
	explain.Options
	policies      stringList
	pods          string
	kube          bool
	kubeconfig    string
	upstreamDNS   stringList
	privateCIDRs  stringList
	searchDomains stringList
	mode          string
	output        string
}

// explainTimeout bounds the API reads and the lookup of --resolve.
const explainTimeout = 30 * time.Second

// explainMain prints the decision `run` makes for one request and why
// (package explain): exit 0 allowed, 1 denied, 2 usage or unreadable
// input.
func explainMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseExplainFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	in, err := loadExplainInput(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	r, err := explain.Explain(ctx, o.Options, in)
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	if o.output == "json" {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	if r.Final().Allowed() {
		return 0
	}
	return 1
}

func parseExplainFlags(args []string, stderr io.Writer) (*explainOptions, error) {
	o := &explainOptions{}
	fs := flag.NewFlagSet("egressd explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Pod, "pod", "", "the client pod, NAMESPACE/NAME")
	fs.StringVar(&o.IP, "ip", "", "the client's source IP (instead of --pod)")
	fs.StringVar(&o.Host, "host", "", "the destination host: a name or an IP literal")
	fs.IntVar(&o.Port, "port", 0, "the destination port (not with --kind dns: a DNS question is about any port)")
	fs.StringVar(&o.Kind, "kind", "connect", "connect, sni, http (decided alike, on the port) or dns (any port)")
	fs.Var(&o.policies, "policy", "policy file or directory (repeatable), as for run")
	fs.StringVar(&o.pods, "pods", "", "pods file, as for run")
	fs.BoolVar(&o.kube, "kube", false, "read policies and pods of --namespace from the Kubernetes API (read only)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file for --kube; empty: in-cluster, then the default rules")
	fs.StringVar(&o.Namespace, "namespace", "", "the namespace egressd serves (--kube)")
	fs.BoolVar(&o.Resolve, "resolve", false, "look the host up and show the guard's class of every address")
	fs.Var(&o.upstreamDNS, "upstream-dns", "upstream DNS server host:port for --resolve (repeatable; default: the nameservers of /etc/resolv.conf)")
	fs.Var(&o.privateCIDRs, "private-cidr", "the cluster's pod and service CIDRs (repeatable), private to the guard as for run")
	fs.StringVar(&o.mode, "mode", string(policy.ModeEnforce), "the instance's --mode: enforce or audit")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "the instance's --cluster-domain (--kind dns)")
	fs.Var(&o.searchDomains, "search-domain", "a search domain of the node (repeatable; --kind dns; default: the search list of /etc/resolv.conf, as run reads it)")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.Path, "path", "", "with --kind connect or sni: an HTTP request target inside the tunnel (/v1/models); decided by an inspecting rule's http entries")
	fs.StringVar(&o.Method, "method", "", "the HTTP method of --path (default GET)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: egressd explain (--pod NS/NAME | --ip IP) --host H --port P [--kind connect|dns|sni|http]
                       [--policy PATH... --pods FILE | --kube [--kubeconfig F] --namespace NS]
                       [--resolve] [--upstream-dns ADDR] [--mode M] [-o text|json]
                       [--cluster-domain D] [--search-domain D...]
                       [--path P [--method M]]

Prints the decision egressd run makes for the request, and why. Exit 0 allowed,
1 denied, 2 usage or unreadable input.

`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	var errs []error
	switch {
	case (o.Pod == "") == (o.IP == ""):
		errs = append(errs, errors.New("give exactly one of --pod NS/NAME and --ip IP"))
	case o.Pod != "":
		if ns, name, ok := strings.Cut(o.Pod, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--pod %q: want NAMESPACE/NAME", o.Pod))
		}
	default:
		if _, err := netip.ParseAddr(o.IP); err != nil {
			errs = append(errs, fmt.Errorf("--ip: %w", err))
		}
	}
	if o.Host == "" {
		errs = append(errs, errors.New("--host is required"))
	}
	switch o.Kind {
	case "dns":
		if o.Port != 0 {
			errs = append(errs, errors.New("--kind dns asks about any port: drop --port"))
		}
	case "connect", "sni", "http":
		if o.Port == 0 {
			errs = append(errs, fmt.Errorf("--port is required with --kind %s (1-65535)", o.Kind))
		} else if o.Port < 1 || o.Port > 65535 {
			errs = append(errs, fmt.Errorf("--port %d: want 1-65535", o.Port))
		}
	default:
		errs = append(errs, fmt.Errorf("--kind %q: want connect, dns, sni or http", o.Kind))
	}
	if err := o.CheckRequest(); err != nil {
		errs = append(errs, err)
	}
	o.Mode = policy.Mode(o.mode)
	switch o.Mode {
	case policy.ModeEnforce, policy.ModeAudit:
	default:
		errs = append(errs, fmt.Errorf("--mode %q: want enforce or audit", o.mode))
	}
	if o.output != "text" && o.output != "json" {
		errs = append(errs, fmt.Errorf("-o %q: want text or json", o.output))
	}
	switch {
	case o.kube && (o.pods != "" || len(o.policies) > 0):
		errs = append(errs, errors.New("--kube reads policies and pods from the API: drop --policy and --pods"))
	case o.kube && o.Namespace == "":
		errs = append(errs, errors.New("--kube needs --namespace (the namespace egressd serves)"))
	case !o.kube && (len(o.policies) == 0 || o.pods == ""):
		errs = append(errs, errors.New("give --policy and --pods, or --kube"))
	}
	if !o.kube {
		o.Namespace = "" // the pods of a file are every namespace's
	}
	for _, c := range o.privateCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("--private-cidr: %w", err))
		}
		o.PrivateCIDRs = append(o.PrivateCIDRs, p)
	}
	o.UpstreamDNS = o.upstreamDNS
	o.SearchDomains = o.searchDomains
	if len(o.SearchDomains) == 0 {
		// What run recognises (cmd/egressd/dns.go); no file, no domains.
		o.SearchDomains, _ = resolver.SearchFromResolvConf("")
	}
	return o, errors.Join(errs...)
}

// explainValidate: explain says what a policy decides, inspect: true
// included, whether or not the instance that runs it has an inspection CA
// (egressd check --inspect says whether it loads).
var explainValidate = policy.ValidateOptions{InspectAvailable: true}

// loadExplainInput reads what run would hold: the snapshot and the pods.
func loadExplainInput(ctx context.Context, o *explainOptions) (explain.Input, error) {
	if o.kube {
		return loadExplainKube(ctx, o)
	}
	files, err := watch.Read(o.policies)
	if err != nil {
		return explain.Input{}, err
	}
	snap, err := loadPolicies(files, explainValidate)
	if err != nil {
		return explain.Input{}, err
	}
	pods, err := readPods([]string{o.pods})
	if err != nil {
		return explain.Input{}, err
	}
	return explain.Input{Snapshot: snap, Pods: pods}, nil
}

// loadExplainKube lists the pods and EgressPolicies of the namespace once,
// read only (run's controller also writes status; explain must not).
func loadExplainKube(ctx context.Context, o *explainOptions) (explain.Input, error) {
	var in explain.Input
	client, err := kube.Connect(o.kubeconfig)
	if err != nil {
		return in, fmt.Errorf("--kube: %w", err)
	}
	pl, err := client.Pods(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("--kube: list pods: %w", err)
	}
	for i := range pl.Items {
		in.Pods = append(in.Pods, &pl.Items[i])
	}
	ul, err := client.EgressPolicies(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("--kube: list EgressPolicies: %w", err)
	}
	var docs []policy.Document
	for _, u := range ul.Items {
		origin := "EgressPolicy " + u.GetNamespace() + "/" + u.GetName()
		var ep policy.EgressPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
			in.Invalid = append(in.Invalid, fmt.Sprintf("%s: decode: %v", origin, err))
			continue
		}
		ep.Status = policy.EgressPolicyStatus{}
		d := policy.Document{Origin: origin, Policy: ep}
		if err := policy.ValidateWith(d, explainValidate); err != nil {
			in.Invalid = append(in.Invalid, err.Error())
			continue
		}
		docs = append(docs, d)
	}
	if in.Snapshot, err = policy.CompileWith(docs, explainValidate); err != nil {
		return in, err
	}
	return in, nil
}
