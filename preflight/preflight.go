package preflight

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/policy"
)

// Config is what a preflight checks against.
type Config struct {
	// Namespace of egressd and its workloads; required. Records of other
	// namespaces are left out.
	Namespace string
	// Confine is the podSelector of the egressd-workloads NetworkPolicy
	// that enforce comes with (the one in the namespace, or the one
	// `egressd netpol` would make); nil means no NetworkPolicy would
	// apply: pods keep their other paths out, and are not checked.
	Confine *metav1.LabelSelector
	// Resolvers are egressd's DNS addresses (its Service's ClusterIPs): a
	// confined pod's dnsConfig must name only these. Empty means none is
	// known: every confined pod's DNS is reported.
	Resolvers []string
	// Since starts the window of records; zero means every record read.
	Since time.Time
}

// Validate reports what is missing, in the flags' words.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("preflight: --namespace is required"))
	}
	if c.Confine != nil {
		if _, err := metav1.LabelSelectorAsSelector(c.Confine); err != nil {
			errs = append(errs, fmt.Errorf("preflight: the NetworkPolicy's podSelector: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Checker gathers what the caller hands it; Result says what enforce would
// break. Not safe for concurrent use.
type Checker struct {
	cfg     Config
	confine labels.Selector
	res     Result
	denials map[denialKey]*Denial
	unknown map[string]*Unknown
}

type denialKey struct{ workload, host string }

// New returns a Checker for cfg.
func New(cfg Config) (*Checker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Checker{cfg: cfg, denials: map[denialKey]*Denial{}, unknown: map[string]*Unknown{}}
	if cfg.Confine != nil {
		c.confine, _ = metav1.LabelSelectorAsSelector(cfg.Confine) // checked by Validate
	}
	c.res = Result{Namespace: cfg.Namespace, NetworkPolicy: cfg.Confine != nil, Resolvers: cfg.Resolvers}
	if !cfg.Since.IsZero() {
		since := cfg.Since.UTC()
		c.res.Since = &since
	}
	return c, nil
}

// Policies notes the namespace's policies in audit mode: they stay in
// audit under an enforcing instance.
func (c *Checker) Policies(docs []policy.Document) {
	for _, d := range docs {
		if d.Policy.Spec.Mode == policy.ModeAudit {
			c.res.AuditPolicies = append(c.res.AuditPolicies, d.Policy.Name)
		}
	}
	slices.Sort(c.res.AuditPolicies)
	c.res.AuditPolicies = slices.Compact(c.res.AuditPolicies)
}

// Add takes one merged record (auditlog.Merger's output).
func (c *Checker) Add(r *auditlog.Record) {
	if r.Probe != "" {
		return // egressd probe's controls are denied on purpose
	}
	if !c.cfg.Since.IsZero() && r.Time.Before(c.cfg.Since) {
		return
	}
	if r.Client.Namespace != "" && r.Client.Namespace != c.cfg.Namespace {
		return
	}
	c.res.Records += r.Requests()
	if r.Unknown() {
		u := c.unknown[r.Client.IP]
		if u == nil {
			u = &Unknown{IP: r.Client.IP}
			c.unknown[r.Client.IP] = u
		}
		u.Requests += r.Requests()
		u.Hosts = addSorted(u.Hosts, r.Host)
		u.Last = later(u.Last, r.Time)
		return
	}
	if !r.WouldDeny {
		return
	}
	w, _ := r.WorkloadOf()
	k := denialKey{w.Kind + "/" + w.Name, r.Host}
	d := c.denials[k]
	if d == nil {
		d = &Denial{Workload: k.workload, Host: r.Host, First: r.Time}
		c.denials[k] = d
	}
	d.Requests += r.Requests()
	d.Reasons = addSorted(d.Reasons, r.Reason)
	if r.Port != 0 {
		d.Ports = addSorted(d.Ports, r.Port)
	}
	if r.Time.Before(d.First) {
		d.First = r.Time
	}
	d.Last = later(d.Last, r.Time)
}

// Result is the answer, sorted for stable output.
func (c *Checker) Result() *Result {
	res := c.res
	for _, d := range c.denials {
		res.WouldDeny = append(res.WouldDeny, *d)
	}
	slices.SortFunc(res.WouldDeny, func(a, b Denial) int {
		return cmp.Or(cmp.Compare(a.Workload, b.Workload), cmp.Compare(a.Host, b.Host))
	})
	for _, u := range c.unknown {
		res.Unknown = append(res.Unknown, *u)
	}
	slices.SortFunc(res.Unknown, func(a, b Unknown) int { return cmp.Compare(a.IP, b.IP) })
	res.Safe = len(res.Pods) == 0 && len(res.WouldDeny) == 0 && res.Records > 0
	return &res
}

// Result is what enforcing would break. Its JSON is `egressd preflight
// --json`'s output.
type Result struct {
	Namespace string `json:"namespace"`
	// Safe: enforcing would deny nothing that was seen.
	Safe bool `json:"safe"`
	// NetworkPolicy: pods were checked against the egressd-workloads
	// NetworkPolicy's selector.
	NetworkPolicy bool       `json:"network_policy"`
	Resolvers     []string   `json:"resolvers"`
	Since         *time.Time `json:"since,omitempty"`
	// PodsChecked are the running pods the NetworkPolicy would confine.
	PodsChecked int `json:"pods_checked"`
	// Pods would lose egress under enforce.
	Pods []Pod `json:"pods"`
	// Records are the requests of the namespace in the window.
	Records   int64    `json:"records"`
	WouldDeny []Denial `json:"would_deny"`
	// Unknown clients are denied in every mode already.
	Unknown       []Unknown `json:"unknown_clients"`
	AuditPolicies []string  `json:"audit_policies"`
}

// Pod is a pod that would lose egress, and why.
type Pod struct {
	Name     string `json:"name"`
	Workload string `json:"workload"`
	Injected bool   `json:"injected"`
	// Problems, each in a few words: "container app: no HTTPS_PROXY",
	// "DNS: dnsPolicy ClusterFirst, not egressd's resolver".
	Problems []string `json:"problems"`
}

// Denial is the would-deny requests of one workload to one host.
type Denial struct {
	Workload string    `json:"workload"`
	Host     string    `json:"host"`
	Ports    []int     `json:"ports,omitempty"`
	Reasons  []string  `json:"reasons"`
	Requests int64     `json:"requests"`
	First    time.Time `json:"first_seen"`
	Last     time.Time `json:"last_seen"`
}

// Unknown is a client address no pod of the namespace had.
type Unknown struct {
	IP       string    `json:"ip"`
	Requests int64     `json:"requests"`
	Hosts    []string  `json:"hosts"`
	Last     time.Time `json:"last_seen"`
}

func addSorted[T cmp.Ordered](s []T, v T) []T {
	if i, found := slices.BinarySearch(s, v); !found {
		s = slices.Insert(s, i, v)
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Pods checks the namespace's pods: each running pod the NetworkPolicy
// would confine needs the proxy variables in every container and egressd
// as its only resolver. Host-network pods and pods that finished are
// left out (no NetworkPolicy applies to the former; the latter send
// nothing).
func (c *Checker) Pods(pods []*corev1.Pod) {
	if c.confine == nil {
		return
	}
	for _, p := range pods {
		if p.Namespace != "" && p.Namespace != c.cfg.Namespace || p.Spec.HostNetwork ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			!c.confine.Matches(labels.Set(p.Labels)) {
			continue
		}
		c.res.PodsChecked++
		problems := proxyProblems(p)
		if dp := c.dnsProblem(p); dp != "" {
			problems = append(problems, dp)
		}
		if len(problems) == 0 {
			continue
		}
		w := identity.WorkloadOf(p)
		_, injected := p.Annotations[inject.AnnotationInjected]
		c.res.Pods = append(c.res.Pods, Pod{Name: p.Name, Workload: w.Kind + "/" + w.Name, Injected: injected, Problems: problems})
	}
	slices.SortFunc(c.res.Pods, func(a, b Pod) int { return cmp.Compare(a.Name, b.Name) })
}

// proxyProblems names every container (init containers too) without
// HTTPS_PROXY in either spelling. A container with envFrom may get it from
// a ConfigMap or Secret preflight does not read: it is named too, saying so.
func proxyProblems(p *corev1.Pod) []string {
	var out []string
	check := func(kind string, cs []corev1.Container) {
		for _, ct := range cs {
			if hasProxy(ct.Env) {
				continue
			}
			msg := fmt.Sprintf("%s %s: no HTTPS_PROXY", kind, ct.Name)
			if len(ct.EnvFrom) > 0 {
				msg += " in env (envFrom not read)"
			}
			out = append(out, msg)
		}
	}
	check("init container", p.Spec.InitContainers)
	check("container", p.Spec.Containers)
	return out
}

func hasProxy(env []corev1.EnvVar) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
		return (e.Name == "HTTPS_PROXY" || e.Name == "https_proxy") && (e.Value != "" || e.ValueFrom != nil)
	})
}

// dnsProblem says why the pod's DNS would fail under the NetworkPolicy,
// which lets it reach egressd only: its resolvers must all be egressd's.
func (c *Checker) dnsProblem(p *corev1.Pod) string {
	dnsPolicy := p.Spec.DNSPolicy
	if dnsPolicy == "" {
		dnsPolicy = corev1.DNSClusterFirst
	}
	var ns []string
	if p.Spec.DNSConfig != nil {
		ns = p.Spec.DNSConfig.Nameservers
	}
	egressd := func(a string) bool { return slices.Contains(c.cfg.Resolvers, a) }
	if dnsPolicy == corev1.DNSNone && len(ns) > 0 && !slices.ContainsFunc(ns, func(a string) bool { return !egressd(a) }) {
		return ""
	}
	if len(ns) == 0 {
		return fmt.Sprintf("DNS: dnsPolicy %s, not egressd's resolver", dnsPolicy)
	}
	return fmt.Sprintf("DNS: dnsPolicy %s, nameservers %v, not only egressd's %v", dnsPolicy, ns, c.cfg.Resolvers)
}
