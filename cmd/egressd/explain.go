package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// explainOptions are the flags of `egressd explain`.
type explainOptions struct {
	pod, ip      string
	host         string
	port         int
	kind         string
	policies     stringList
	pods         string
	kube         bool
	kubeconfig   string
	namespace    string
	resolve      bool
	upstreamDNS  stringList
	privateCIDRs stringList
	mode         string
	output       string
	// path and method: one HTTP request inside the tunnel (explain_http.go).
	path, method string
}

// explainTimeout bounds the API reads and the lookup of --resolve.
const explainTimeout = 30 * time.Second

// explainMain prints the decision `run` makes for one request and why:
// the identity, every policy of the namespace and whether it selects the
// pod, the rules that name the host, and (with --resolve, or for an IP
// literal) the guard's class of each address. Exit 0 allowed, 1 denied, 2
// usage or unreadable input.
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
	r, err := explain(ctx, o, in)
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	if o.output == "json" {
		err = writeExplainJSON(stdout, r)
	} else {
		err = writeExplainText(stdout, r)
	}
	if err != nil {
		fmt.Fprintf(stderr, "egressd explain: %v\n", err)
		return 2
	}
	if r.final.Allowed() {
		return 0
	}
	return 1
}

func parseExplainFlags(args []string, stderr io.Writer) (*explainOptions, error) {
	o := &explainOptions{}
	fs := flag.NewFlagSet("egressd explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.pod, "pod", "", "the client pod, NAMESPACE/NAME")
	fs.StringVar(&o.ip, "ip", "", "the client's source IP (instead of --pod)")
	fs.StringVar(&o.host, "host", "", "the destination host: a name or an IP literal")
	fs.IntVar(&o.port, "port", 0, "the destination port (not with --kind dns: a DNS question is about any port)")
	fs.StringVar(&o.kind, "kind", "connect", "connect, sni, http (decided alike, on the port) or dns (any port)")
	fs.Var(&o.policies, "policy", "policy file or directory (repeatable), as for run")
	fs.StringVar(&o.pods, "pods", "", "pods file, as for run")
	fs.BoolVar(&o.kube, "kube", false, "read policies and pods of --namespace from the Kubernetes API (read only)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file for --kube; empty: in-cluster, then the default rules")
	fs.StringVar(&o.namespace, "namespace", "", "the namespace egressd serves (--kube)")
	fs.BoolVar(&o.resolve, "resolve", false, "look the host up and show the guard's class of every address")
	fs.Var(&o.upstreamDNS, "upstream-dns", "upstream DNS server host:port for --resolve (repeatable; default: the nameservers of /etc/resolv.conf)")
	fs.Var(&o.privateCIDRs, "private-cidr", "the cluster's pod and service CIDRs (repeatable), private to the guard as for run")
	fs.StringVar(&o.mode, "mode", string(policy.ModeEnforce), "the instance's --mode: enforce or audit")
	fs.StringVar(&o.output, "o", "text", "output: text or json")
	fs.StringVar(&o.path, "path", "", "with --kind connect or sni: an HTTP request target inside the tunnel (/v1/models); decided by an inspecting rule's http entries")
	fs.StringVar(&o.method, "method", "", "the HTTP method of --path (default GET)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: egressd explain (--pod NS/NAME | --ip IP) --host H --port P [--kind connect|dns|sni|http]
                       [--policy PATH... --pods FILE | --kube [--kubeconfig F] --namespace NS]
                       [--resolve] [--upstream-dns ADDR] [--mode M] [-o text|json]
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
	case (o.pod == "") == (o.ip == ""):
		errs = append(errs, errors.New("give exactly one of --pod NS/NAME and --ip IP"))
	case o.pod != "":
		if ns, name, ok := strings.Cut(o.pod, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--pod %q: want NAMESPACE/NAME", o.pod))
		}
	default:
		if _, err := netip.ParseAddr(o.ip); err != nil {
			errs = append(errs, fmt.Errorf("--ip: %w", err))
		}
	}
	if o.host == "" {
		errs = append(errs, errors.New("--host is required"))
	}
	switch o.kind {
	case "dns":
		if o.port != 0 {
			errs = append(errs, errors.New("--kind dns asks about any port: drop --port"))
		}
	case "connect", "sni", "http":
		if o.port < 1 || o.port > 65535 {
			errs = append(errs, fmt.Errorf("--port %d: want 1-65535", o.port))
		}
	default:
		errs = append(errs, fmt.Errorf("--kind %q: want connect, dns, sni or http", o.kind))
	}
	if err := o.checkRequest(); err != nil {
		errs = append(errs, err)
	}
	switch policy.Mode(o.mode) {
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
	case o.kube && o.namespace == "":
		errs = append(errs, errors.New("--kube needs --namespace (the namespace egressd serves)"))
	case !o.kube && (len(o.policies) == 0 || o.pods == ""):
		errs = append(errs, errors.New("give --policy and --pods, or --kube"))
	}
	for _, c := range o.privateCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, fmt.Errorf("--private-cidr: %w", err))
		}
	}
	return o, errors.Join(errs...)
}

// explainInput is what run would hold: the snapshot and the pods.
type explainInput struct {
	snap *policy.Snapshot
	pods []*corev1.Pod
	// invalid names the EgressPolicies of the API that fail validation:
	// not in force (a running egressd may hold an earlier accepted
	// generation; explain cannot know it).
	invalid []string
}

// explainValidate: explain says what a policy decides, inspect: true
// included, whether or not the instance that runs it has an inspection CA
// (egressd check --inspect says whether it loads).
var explainValidate = policy.ValidateOptions{InspectAvailable: true}

func loadExplainInput(ctx context.Context, o *explainOptions) (*explainInput, error) {
	if o.kube {
		return loadExplainKube(ctx, o)
	}
	files, err := watch.Read(o.policies)
	if err != nil {
		return nil, err
	}
	snap, err := compilePolicies(files, explainValidate)
	if err != nil {
		return nil, err
	}
	pods, err := readPods([]string{o.pods})
	if err != nil {
		return nil, err
	}
	return &explainInput{snap: snap, pods: pods}, nil
}

// loadExplainKube lists the pods and EgressPolicies of the namespace once,
// read only (run's controller also writes status; explain must not).
func loadExplainKube(ctx context.Context, o *explainOptions) (*explainInput, error) {
	client, err := kube.Connect(o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	pl, err := client.Pods(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("--kube: list pods: %w", err)
	}
	in := &explainInput{}
	for i := range pl.Items {
		in.pods = append(in.pods, &pl.Items[i])
	}
	ul, err := client.EgressPolicies(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("--kube: list EgressPolicies: %w", err)
	}
	var docs []policy.Document
	for _, u := range ul.Items {
		origin := "EgressPolicy " + u.GetNamespace() + "/" + u.GetName()
		var ep policy.EgressPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
			in.invalid = append(in.invalid, fmt.Sprintf("%s: decode: %v", origin, err))
			continue
		}
		ep.Status = policy.EgressPolicyStatus{}
		d := policy.Document{Origin: origin, Policy: ep}
		if err := policy.ValidateWith(d, explainValidate); err != nil {
			in.invalid = append(in.invalid, err.Error())
			continue
		}
		docs = append(docs, d)
	}
	if in.snap, err = policy.CompileWith(docs, explainValidate); err != nil {
		return nil, err
	}
	return in, nil
}

// explainReport is the explanation of one request: what is printed.
type explainReport struct {
	Kind           string          `json:"kind"`
	Host           string          `json:"host"`
	NormalizedHost string          `json:"normalizedHost,omitempty"`
	HostError      string          `json:"hostError,omitempty"`
	Port           int             `json:"port"`
	Identity       explainIdentity `json:"identity"`
	policy.Explanation
	InvalidPolicies []string `json:"invalidPolicies,omitempty"`
	// DNS and Addresses: the lookup of --resolve (or the IP literal) and
	// the guard's answer for each address.
	DNS       *explainDNS        `json:"dns,omitempty"`
	Addresses []policy.AddrCheck `json:"addresses,omitempty"`
	// GuardNote says what the verdict leaves out about the guard.
	GuardNote string `json:"guardNote,omitempty"`
	// HTTP is the request of --path and --method inside the tunnel.
	HTTP     *explainHTTP    `json:"http,omitempty"`
	Decision explainDecision `json:"decision"`

	final policy.Decision
}

type explainIdentity struct {
	Known          bool              `json:"known"`
	IP             string            `json:"ip,omitempty"`
	Namespace      string            `json:"namespace,omitempty"`
	Pod            string            `json:"pod,omitempty"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Initialized    bool              `json:"initialized"`
	// Why says why the source is no client (unknown-client).
	Why string `json:"why,omitempty"`
}

type explainDNS struct {
	Answers []string `json:"answers"`
	CNAMEs  []string `json:"cnames,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// explainDecision is the verdict in the audit record's field names.
type explainDecision struct {
	Verdict   policy.Verdict `json:"verdict"`
	WouldDeny bool           `json:"would_deny"`
	Reason    policy.Reason  `json:"reason"`
	Policy    string         `json:"policy,omitempty"`
	Rule      *int           `json:"rule,omitempty"`
	Purpose   string         `json:"purpose,omitempty"`
	Owner     string         `json:"owner,omitempty"`
	ECH       bool           `json:"ech,omitempty"`
}

func decisionOf(d policy.Decision) explainDecision {
	out := explainDecision{Verdict: d.Verdict, WouldDeny: d.WouldDeny, Reason: d.Reason,
		Policy: d.Policy, Purpose: d.Purpose, Owner: d.Owner, ECH: d.ECH}
	if d.Rule >= 0 {
		rule := d.Rule
		out.Rule = &rule
	}
	return out
}

// explain decides the request with run's own admission pipeline
// (admit.Pipeline): Identify, Admit (unknown-client before the host is
// looked at, then NormalizeHost, the port, Decide), then Route (the lookup
// with --resolve, policy.Guard.CheckAll over the addresses to dial). What
// explain adds is only what it shows: the policies, the rules, each
// address's class.
func explain(ctx context.Context, o *explainOptions, in *explainInput) (*explainReport, error) {
	r := &explainReport{Kind: o.kind, Host: o.host, Port: o.port, InvalidPolicies: in.invalid}
	mode := policy.Mode(o.mode)
	var extra []netip.Prefix
	for _, c := range o.privateCIDRs {
		extra = append(extra, netip.MustParsePrefix(c)) // validated
	}
	g := policy.NewGuard(policy.GuardConfig{ExtraPrivate: extra})
	store := identity.NewStore()
	store.Replace(in.pods)
	cfg := admit.Config{Policy: func() *policy.Snapshot { return in.snap }, Identity: store, Guard: g, Mode: mode}
	if o.resolve {
		cfg.Resolver = explainLookuper{o}
	}
	pipe, err := admit.New(cfg)
	if err != nil {
		return nil, err
	}
	c, why := findClient(o, in.pods, pipe.Identify)
	r.Identity = identityOf(c, why, o)
	a := pipe.Admit(admit.Request{Client: c, Host: o.host, Port: o.port, AnyPort: o.kind == "dns"})

	// What is shown besides the decision: the host as NormalizeHost gives
	// it and the policies (still shown when the host is invalid).
	host, herr := policy.NormalizeHost(o.host)
	if herr == nil {
		if host != o.host {
			r.NormalizedHost = host
		}
	} else {
		r.HostError = herr.Error()
		host = ""
	}
	r.Explanation = in.snap.Explain(policy.DecideArgs{Client: c, Host: host, Port: o.port, Mode: mode})
	r.Explanation.Decision = a.Decision
	r.final = a.Decision
	if c != nil && herr == nil {
		r.route(ctx, o, pipe, g, host)
	}
	r.decideRequest(o, in.snap)
	r.Decision = decisionOf(r.final)
	return r, nil
}

// route applies run's last steps: Route resolves the name (an IP literal
// is its own address) and puts every address through the guard; run dials
// what it permits. run routes only an allowed decision: for a denied one
// the addresses are shown, not judged, and so are a DNS answer's.
func (r *explainReport) route(ctx context.Context, o *explainOptions, pipe *admit.Pipeline, g *policy.Guard, host string) {
	if _, err := netip.ParseAddr(host); err != nil && !o.resolve {
		if o.kind != "dns" && r.final.Allowed() {
			r.GuardNote = "the guard checks every address the name resolves to before run dials it: --resolve shows them"
		}
		return
	}
	if o.kind == "dns" || !r.final.Allowed() {
		addrs, ans, looked, err := pipe.Resolve(ctx, host)
		r.showDNS(ans, looked, err)
		if o.kind != "dns" {
			r.Addresses, _ = g.Explain(r.final, addrs, uint16(o.port))
			return
		}
		r.Addresses = policy.Classes(addrs)
		return
	}
	rt := pipe.Route(ctx, r.final, host, o.port)
	r.showDNS(rt.Answer, rt.Looked, rt.Err)
	r.Addresses, _ = g.Explain(r.final, rt.Candidates, uint16(o.port))
	r.final = rt.Decision
	if rt.Err != nil && r.final.Allowed() {
		r.GuardNote = "no address to dial: run records outcome resolve-failed"
	}
}

// showDNS shows a lookup's answer (nothing for an IP literal).
func (r *explainReport) showDNS(ans resolver.Answer, looked bool, err error) {
	if !looked {
		return
	}
	r.DNS = &explainDNS{CNAMEs: ans.CNAMEs, Answers: []string{}}
	for _, a := range ans.Addrs {
		r.DNS.Answers = append(r.DNS.Answers, a.String())
	}
	if err != nil {
		r.DNS.Error = err.Error()
	}
}

// explainLookuper is the Lookuper of --resolve: run's resolver, built for
// the lookup from --upstream-dns or /etc/resolv.conf.
type explainLookuper struct{ o *explainOptions }

func (l explainLookuper) LookupIP(ctx context.Context, host string) (resolver.Answer, error) {
	upstreams := []string(l.o.upstreamDNS)
	if len(upstreams) == 0 {
		var err error
		if upstreams, err = resolver.UpstreamsFromResolvConf("/etc/resolv.conf"); err != nil {
			return resolver.Answer{}, fmt.Errorf("--upstream-dns not given and /etc/resolv.conf unusable: %w", err)
		}
	}
	res, err := resolver.New(resolver.Config{Upstreams: upstreams, Metrics: metrics.New()})
	if err != nil {
		return resolver.Answer{}, err
	}
	return res.LookupIP(ctx, host)
}

// findClient returns the client run would identify (identify is the
// pipeline's, over the identity store built from the pods: live pods only,
// an IP of two pods is nobody's), or nil and why not.
func findClient(o *explainOptions, pods []*corev1.Pod, identify func(netip.Addr) *policy.Client) (*policy.Client, string) {
	if o.ip != "" {
		ip := netip.MustParseAddr(o.ip) // validated
		if c := identify(ip); c != nil {
			return c, ""
		}
		return nil, whyUnknown(pods, ip.Unmap())
	}
	ns, name, _ := strings.Cut(o.pod, "/")
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		if o.kube && ns != o.namespace {
			return nil, fmt.Sprintf("pod %s is not in namespace %s, the one egressd serves", o.pod, o.namespace)
		}
		return nil, fmt.Sprintf("no pod %s", o.pod)
	}
	ips := podAddrs(pods[i])
	if len(ips) == 0 {
		return nil, fmt.Sprintf("pod %s has no IP (phase %s): its connections cannot come from it yet", o.pod, phaseOf(pods[i]))
	}
	for _, ip := range ips {
		if c := identify(ip); c != nil && c.Namespace == ns && c.Pod == name {
			return c, ""
		}
	}
	return nil, whyUnknown(pods, ips[0])
}

// whyUnknown says why no client has ip: no pod has it, the pods that
// have it are not clients, or two live pods claim it.
func whyUnknown(pods []*corev1.Pod, ip netip.Addr) string {
	var live, dead []string
	for _, p := range pods {
		if !slices.Contains(podAddrs(p), ip) {
			continue
		}
		// A store of this pod alone says whether run counts it.
		one := identity.NewStore()
		one.Replace([]*corev1.Pod{p})
		if _, ok := one.Lookup(ip); ok {
			live = append(live, p.Namespace+"/"+p.Name)
			continue
		}
		state := "phase " + phaseOf(p)
		if p.Spec.HostNetwork {
			state += ", hostNetwork"
		}
		dead = append(dead, fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, state))
	}
	switch {
	case len(live) > 1:
		return fmt.Sprintf("%s is claimed by %d live pods (%s): an ambiguous source is nobody", ip, len(live), strings.Join(live, ", "))
	case len(dead) > 0:
		return fmt.Sprintf("%s belongs to %s: only Running or Pending pods without hostNetwork are clients", ip, strings.Join(dead, ", "))
	}
	return fmt.Sprintf("no pod has the IP %s", ip)
}

func podAddrs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	add(p.Status.PodIP)
	return out
}

func phaseOf(p *corev1.Pod) string {
	if p.Status.Phase == "" {
		return "unknown"
	}
	return string(p.Status.Phase)
}

func identityOf(c *policy.Client, why string, o *explainOptions) explainIdentity {
	if c == nil {
		id := explainIdentity{Why: why, IP: o.ip}
		if ns, name, ok := strings.Cut(o.pod, "/"); ok {
			id.Namespace, id.Pod = ns, name
		}
		return id
	}
	return explainIdentity{Known: true, IP: c.IP.String(), Namespace: c.Namespace, Pod: c.Pod,
		ServiceAccount: c.ServiceAccount, Labels: c.Labels, Initialized: c.Initialized}
}
