package explain

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// Options is the request to explain and how: what `egressd explain`'s
// flags say (cmd/egressd checks them).
type Options struct {
	// Pod (NAMESPACE/NAME) or IP names the client; exactly one is set.
	Pod, IP string
	// Host is the destination, a name or an IP literal, as the client
	// names it.
	Host string
	// Port is the destination port, 1-65535; zero for Kind "dns".
	Port int
	// Kind is connect, sni, http (decided alike, on the port) or dns (any
	// port).
	Kind string
	// Namespace is the one namespace the pods of Input were listed from
	// (--kube); empty means the pods are every namespace's.
	Namespace string
	// Resolve looks the host up and shows the guard's class of every
	// address.
	Resolve bool
	// UpstreamDNS are the servers of Resolve; empty means the nameservers
	// of /etc/resolv.conf.
	UpstreamDNS []string
	// PrivateCIDRs are the cluster's pod and service CIDRs, private to the
	// guard as for run.
	PrivateCIDRs []netip.Prefix
	// Mode is the instance's --mode; zero means enforce.
	Mode policy.Mode
	// ClusterDomain is run's --cluster-domain; zero means
	// "cluster.local".
	ClusterDomain string
	// SearchDomains are the node's search domains run recognises
	// expansions of (run reads them from /etc/resolv.conf).
	SearchDomains []string
	// Path and Method: one HTTP request inside the tunnel (http.go).
	Path, Method string
}

// Input is what run would hold: the snapshot and the pods.
type Input struct {
	Snapshot *policy.Snapshot
	Pods     []*corev1.Pod
	// Invalid names the EgressPolicies of the API that fail validation:
	// not in force (a running egressd may hold an earlier accepted
	// generation; explain cannot know it).
	Invalid []string
}

// Report is the explanation of one request: what is printed.
type Report struct {
	Kind           string         `json:"kind"`
	Host           string         `json:"host"`
	NormalizedHost string         `json:"normalizedHost,omitempty"`
	HostError      string         `json:"hostError,omitempty"`
	Port           int            `json:"port"`
	Identity       identityReport `json:"identity"`
	policy.Explanation
	InvalidPolicies []string `json:"invalidPolicies,omitempty"`
	// DNS and Addresses: the lookup of --resolve (or the IP literal) and
	// the guard's answer for each address.
	DNS       *dnsReport         `json:"dns,omitempty"`
	Addresses []policy.AddrCheck `json:"addresses,omitempty"`
	// GuardNote says what the verdict leaves out about the guard.
	GuardNote string `json:"guardNote,omitempty"`
	// HTTP is the request of --path and --method inside the tunnel.
	HTTP     *httpReport `json:"http,omitempty"`
	Decision Decision    `json:"decision"`

	final policy.Decision
}

type identityReport struct {
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

type dnsReport struct {
	Answers []string `json:"answers"`
	CNAMEs  []string `json:"cnames,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Decision is the verdict in the audit record's field names.
type Decision struct {
	Verdict   policy.Verdict `json:"verdict"`
	WouldDeny bool           `json:"would_deny"`
	Reason    policy.Reason  `json:"reason"`
	Policy    string         `json:"policy,omitempty"`
	Rule      *int           `json:"rule,omitempty"`
	RuleName  string         `json:"rule_name,omitempty"`
	Purpose   string         `json:"purpose,omitempty"`
	Owner     string         `json:"owner,omitempty"`
	ECH       bool           `json:"ech,omitempty"`
}

// Final is the decision run makes for the request: what the verdict line
// and the exit code of `egressd explain` say.
func (r *Report) Final() policy.Decision { return r.final }

func decisionOf(d policy.Decision) Decision {
	out := Decision{Verdict: d.Verdict, WouldDeny: d.WouldDeny, Reason: d.Reason,
		Policy: d.Policy, RuleName: d.RuleName, Purpose: d.Purpose, Owner: d.Owner, ECH: d.ECH}
	if d.Rule >= 0 {
		rule := d.Rule
		out.Rule = &rule
	}
	return out
}

// Explain decides the request with run's own admission pipeline
// (admit.Pipeline): Identify, Admit (unknown-client before the host is
// looked at, then NormalizeHost, the port, Decide), then Route (the lookup
// with --resolve, policy.Guard.CheckAll over the addresses to dial). What
// explain adds is only what it shows: the policies, the rules, each
// address's class.
func Explain(ctx context.Context, o Options, in Input) (*Report, error) {
	if o.IP != "" {
		if _, err := netip.ParseAddr(o.IP); err != nil {
			return nil, fmt.Errorf("client IP: %w", err)
		}
	}
	r := &Report{Kind: o.Kind, Host: o.Host, Port: o.Port, InvalidPolicies: in.Invalid}
	mode := o.Mode
	if mode == "" {
		mode = policy.ModeEnforce
	}
	g := policy.NewGuard(policy.GuardConfig{ExtraPrivate: o.PrivateCIDRs})
	store := identity.NewStore()
	store.Replace(in.Pods)
	// The same pipeline as run's proxy and DNS server: for --kind dns the
	// cluster domain, the cluster's reverse names (--private-cidr, as run
	// passes them) and the search domains decide as the server does.
	cfg := admit.Config{
		Inputs: admit.Inputs{Policy: func() *policy.Snapshot { return in.Snapshot }, Identity: store, Mode: mode},
		Names:  admit.Names{ClusterDomain: o.ClusterDomain, ClusterCIDRs: o.PrivateCIDRs, SearchDomains: o.SearchDomains},
		Guard:  g,
	}
	if o.Resolve {
		cfg.Resolver = lookuper{&o}
	}
	pipe, err := admit.New(cfg)
	if err != nil {
		return nil, err
	}
	c, why := findClient(&o, in.Pods, pipe.Identify)
	r.Identity = identityOf(c, why, &o)
	a := pipe.Admit(admit.Request{Client: c, Host: o.Host, Port: o.Port, AnyPort: o.Kind == "dns"})

	// What is shown besides the decision: the host as NormalizeHost gives
	// it and the policies (still shown when the host is invalid).
	host, herr := policy.NormalizeHost(o.Host)
	if herr == nil {
		if host != o.Host {
			r.NormalizedHost = host
		}
	} else {
		r.HostError = herr.Error()
		host = ""
	}
	r.Explanation = in.Snapshot.Explain(policy.DecideArgs{Client: c, Host: host, Port: o.Port, Mode: mode})
	r.Explanation.Decision = a.Decision
	r.final = a.Decision
	if c != nil && herr == nil {
		r.route(ctx, &o, pipe, g, host, a.DNSAnswer)
	}
	r.decideRequest(&o, in.Snapshot)
	r.Decision = decisionOf(r.final)
	return r, nil
}

// route applies run's last steps: Route resolves the name (an IP literal
// is its own address) and puts every address through the guard; run dials
// what it permits. run routes only an allowed decision: for a denied one
// the addresses are shown, not judged, and so are a DNS answer's.
func (r *Report) route(ctx context.Context, o *Options, pipe *admit.Pipeline, g *policy.Guard, host string, answer admit.DNSAnswer) {
	if _, err := netip.ParseAddr(host); err != nil && !o.Resolve {
		if o.Kind != "dns" && r.final.Allowed() {
			r.GuardNote = "the guard checks every address the name resolves to before run dials it: --resolve shows them"
		}
		return
	}
	if o.Kind == "dns" || !r.final.Allowed() {
		addrs, ans, looked, err := pipe.Resolve(ctx, host)
		r.showDNS(ans, looked, err)
		if o.Kind != "dns" {
			r.Addresses, _ = g.Explain(r.final, addrs, uint16(o.Port))
			return
		}
		r.Addresses = policy.Classes(addrs)
		if r.final.Allowed() && answer == admit.AnswerUpstream {
			// The DNS server's last step on the upstream's answer: a CNAME
			// to a metadata name, or only never-class addresses.
			if errors.Is(err, resolver.ErrMetadataName) {
				r.final = r.final.Deny(policy.ReasonMetadata)
			} else if never := admit.AllNever(addrs); never != "" {
				r.final = r.final.Deny(never)
			}
		}
		return
	}
	rt := pipe.Route(ctx, r.final, host, o.Port)
	r.showDNS(rt.Answer, rt.Looked, rt.Err)
	r.Addresses, _ = g.Explain(r.final, rt.Candidates, uint16(o.Port))
	r.final = rt.Decision
	if rt.Err != nil && r.final.Allowed() {
		r.GuardNote = "no address to dial: run records outcome resolve-failed"
	}
}

// showDNS shows a lookup's answer (nothing for an IP literal).
func (r *Report) showDNS(ans resolver.Answer, looked bool, err error) {
	if !looked {
		return
	}
	r.DNS = &dnsReport{CNAMEs: ans.CNAMEs, Answers: []string{}}
	for _, a := range ans.Addrs {
		r.DNS.Answers = append(r.DNS.Answers, a.String())
	}
	if err != nil {
		r.DNS.Error = err.Error()
	}
}

// lookuper is the Lookuper of --resolve: run's resolver, built for
// the lookup from --upstream-dns or /etc/resolv.conf.
type lookuper struct{ o *Options }

func (l lookuper) LookupIP(ctx context.Context, host string) (resolver.Answer, error) {
	upstreams := l.o.UpstreamDNS
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
func findClient(o *Options, pods []*corev1.Pod, identify func(netip.Addr) *policy.Client) (*policy.Client, string) {
	if o.IP != "" {
		ip, _ := netip.ParseAddr(o.IP) // checked by Explain
		if c := identify(ip); c != nil {
			return c, ""
		}
		return nil, whyUnknown(pods, ip.Unmap())
	}
	ns, name, _ := strings.Cut(o.Pod, "/")
	i := slices.IndexFunc(pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
	if i < 0 {
		if o.Namespace != "" && ns != o.Namespace {
			return nil, fmt.Sprintf("pod %s is not in namespace %s, the one egressd serves", o.Pod, o.Namespace)
		}
		return nil, fmt.Sprintf("no pod %s", o.Pod)
	}
	ips := identity.PodAddrs(pods[i])
	if len(ips) == 0 {
		return nil, fmt.Sprintf("pod %s has no IP (phase %s): its connections cannot come from it yet", o.Pod, phaseOf(pods[i]))
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
		if !slices.Contains(identity.PodAddrs(p), ip) {
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

func phaseOf(p *corev1.Pod) string {
	if p.Status.Phase == "" {
		return "unknown"
	}
	return string(p.Status.Phase)
}

func identityOf(c *policy.Client, why string, o *Options) identityReport {
	if c == nil {
		id := identityReport{Why: why, IP: o.IP}
		if ns, name, ok := strings.Cut(o.Pod, "/"); ok {
			id.Namespace, id.Pod = ns, name
		}
		return id
	}
	return identityReport{Known: true, IP: c.IP.String(), Namespace: c.Namespace, Pod: c.Pod,
		ServiceAccount: c.ServiceAccount, Labels: c.Labels, Initialized: c.Initialized}
}
