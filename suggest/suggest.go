package suggest

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
)

// Config shapes the suggestions. The zero Config suggests for every
// namespace, folds at 3 siblings and opens no private range.
type Config struct {
	// Namespace keeps the records of one namespace; empty means all.
	Namespace string
	// Fold is the number of sibling hosts under one registrable domain
	// from which they are folded into one "**." pattern; zero means 3, a
	// negative value never folds. 1 is refused: a single host is never
	// widened into a wildcard.
	Fold int
	// Pods are the pods file's pods (egressd run --pods), for the
	// podSelector; nil means the fallback selector (package doc).
	Pods []*corev1.Pod
	// CIDRs are private ranges a suggested rule may open: a host whose
	// recorded addresses are private gets the ranges that hold them in
	// its rule's cidrs. A host with a private address outside them is
	// not suggested (the guard would refuse it anyway). None may overlap
	// the never class.
	CIDRs []netip.Prefix
	// RedirectWindow is how soon after an allowed request of the same pod
	// a new host counts as its redirect target; zero means 5s.
	RedirectWindow time.Duration
}

// Validate checks the options.
func (c Config) Validate() error {
	if c.Fold == 1 {
		return fmt.Errorf("%w: --fold 1 would turn every host into a wildcard; use 2 or more (or -1 to never fold)", ErrOptions)
	}
	for _, p := range c.CIDRs {
		if p != p.Masked() {
			return fmt.Errorf("%w: --cidr %s: write the masked prefix %s", ErrOptions, p, p.Masked())
		}
		if class, _ := policy.Classify(p.Addr()); class != policy.ClassPrivate || p.Bits() == 0 {
			return fmt.Errorf("%w: --cidr %s: not a private range (public addresses need no cidrs)", ErrOptions, p)
		}
		for _, n := range policy.NeverPrefixes() {
			if n.Overlaps(p) {
				return fmt.Errorf("%w: --cidr %s overlaps %s, which no rule can open", ErrOptions, p, n)
			}
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Fold == 0 {
		c.Fold = 3
	}
	if c.RedirectWindow <= 0 {
		c.RedirectWindow = 5 * time.Second
	}
	return c
}

// Suggester collects records and builds the suggestions.
type Suggester struct {
	cfg   Config
	works map[wkey]*workload
	// pods: allowed requests (start, host) of each pod, for redirects.
	timeline map[podKey][]event
	// redirects named by plain HTTP records: pod → target → source host.
	redirects map[podKey]map[string]string
	// Left out, by why: requests that need no rule or must never get one.
	skipped map[string]int64
	records int64
	period  auditlog.Period
}

type wkey struct{ ns, kind, name string }

type podKey struct{ ns, pod string }

type event struct {
	start int64 // unix nanoseconds
	host  string
}

type workload struct {
	ns    string
	w     auditlog.Workload
	pods  map[string]bool
	sas   map[string]bool
	cands map[hostPort]*cand
}

type hostPort struct {
	host string
	port int
}

// cand is a host and port that needs a rule.
type cand struct {
	hostPort
	ns          string
	requests    int64
	reasons     map[string]int64
	classes     map[string]int64
	first, last time.Time
	firstPod    string
	pods        map[string]bool
	cidrs       []netip.Prefix // from Config.CIDRs, holding private addresses seen
	public      bool           // a public address was seen
	private     []netip.Addr   // private addresses outside every Config.CIDRs
	never       netip.Addr     // a never-class address was seen (the host is left out)
}

// New returns a Suggester.
func New(cfg Config) (*Suggester, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Suggester{
		cfg: cfg.withDefaults(), works: map[wkey]*workload{}, timeline: map[podKey][]event{},
		redirects: map[podKey]map[string]string{}, skipped: map[string]int64{},
	}, nil
}

// Reasons whose requests a rule can allow.
var suggestable = map[string]bool{
	string(policy.ReasonNotAllowlisted): true,
	string(policy.ReasonPortNotAllowed): true,
	string(policy.ReasonPrivate):        true, // only with Config.CIDRs
}

// Add takes one merged record (auditlog.Merger's output); it keeps nothing
// of r but copies of its strings.
func (s *Suggester) Add(r *auditlog.Record) {
	if r.Kind == "dns" {
		// A lookup has no port; the request that follows it has.
		return
	}
	if r.Probe != "" {
		s.skip("probe records", r)
		return
	}
	w, known := r.WorkloadOf()
	if !known || r.Reason == string(policy.ReasonUnknownClient) {
		s.skip("unknown clients", r)
		return
	}
	if s.cfg.Namespace != "" && r.Client.Namespace != s.cfg.Namespace {
		return
	}
	s.records++
	if r.Start.Before(s.period.From) || s.period.From.IsZero() {
		s.period.From = r.Start
	}
	if r.Time.After(s.period.To) {
		s.period.To = r.Time
	}
	pk := podKey{r.Client.Namespace, r.Client.Pod}
	if r.Verdict == "allow" {
		s.timeline[pk] = append(s.timeline[pk], event{r.Start.UnixNano(), r.Host})
		// An ambiguous redirect (clients disagree on its host) is an
		// attack shape, never a rule.
		if r.HTTP != nil && r.HTTP.RedirectHost != "" && r.HTTP.RedirectHost != r.Host && !r.HTTP.RedirectAmbiguous {
			m := s.redirects[pk]
			if m == nil {
				m = map[string]string{}
				s.redirects[pk] = m
			}
			if _, ok := m[r.HTTP.RedirectHost]; !ok {
				m[r.HTTP.RedirectHost] = r.Host
			}
		}
	}
	k := wkey{r.Client.Namespace, w.Kind, w.Name}
	wl := s.works[k]
	if wl == nil {
		wl = &workload{ns: k.ns, w: w, pods: map[string]bool{}, sas: map[string]bool{}, cands: map[hostPort]*cand{}}
		s.works[k] = wl
	}
	wl.pods[r.Client.Pod] = true
	if r.Client.ServiceAccount != "" {
		wl.sas[r.Client.ServiceAccount] = true
	}
	class := r.Class()
	if class == auditlog.ClassAllow {
		return // allowed already: the policies in force cover it
	}
	if !suggestable[r.Reason] {
		s.skip("reason "+r.Reason, r)
		return
	}
	if why := badHost(r.Host); why != "" {
		s.skip(why, r)
		return
	}
	hp := hostPort{r.Host, r.Port}
	c := wl.cands[hp]
	if c == nil {
		c = &cand{hostPort: hp, ns: r.Client.Namespace, reasons: map[string]int64{}, classes: map[string]int64{}, pods: map[string]bool{}}
		wl.cands[hp] = c
	}
	n := r.Requests()
	c.requests += n
	c.reasons[r.Reason] += n
	c.classes[class] += n
	c.pods[r.Client.Pod] = true
	if c.first.IsZero() || r.Start.Before(c.first) {
		c.first, c.firstPod = r.Start, r.Client.Pod
	}
	if r.Time.After(c.last) {
		c.last = r.Time
	}
	var addrs []string
	if r.DNS != nil {
		addrs = slices.Clone(r.DNS.Answers)
	}
	if r.Peer != "" {
		if ap, err := netip.ParseAddrPort(r.Peer); err == nil {
			addrs = append(addrs, ap.Addr().String())
		}
	}
	for _, a := range addrs {
		s.classify(c, a)
	}
}

// classify notes where one of the host's addresses lies.
func (s *Suggester) classify(c *cand, text string) {
	a, err := netip.ParseAddr(text)
	if err != nil {
		return
	}
	a = a.Unmap()
	switch class, _ := policy.Classify(a); class {
	case policy.ClassNever:
		c.never = a
	case policy.ClassPublic:
		c.public = true
	default:
		for _, p := range s.cfg.CIDRs {
			if p.Contains(a) {
				if !slices.Contains(c.cidrs, p) {
					c.cidrs = append(c.cidrs, p)
				}
				return
			}
		}
		if !slices.Contains(c.private, a) && len(c.private) < 8 {
			c.private = append(c.private, a)
		}
	}
}

func (s *Suggester) skip(why string, r *auditlog.Record) { s.skipped[why] += r.Requests() }

// badHost says why a host cannot be a rule's exact host, or "".
func badHost(h string) string {
	switch {
	case h == "":
		return "no host"
	case policy.IsMetadataName(h):
		return "metadata names"
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return "IP literals"
	}
	if n, err := policy.NormalizeHost(h); err != nil || n != h {
		return "invalid host names"
	}
	if p, err := policy.ParsePattern(h); err != nil || !p.Exact() {
		return "invalid host names"
	}
	return ""
}

// redirectSource returns the source a recorded HTTP redirect named (a
// plain HTTP record or an inspected one with http.redirect_host: exact),
// else the host whose allowed request by the same pod came at most
// RedirectWindow before c was first seen (the latest such: a guess).
func (s *Suggester) redirectSource(ns string, c *cand) (src string, exact bool) {
	pk := podKey{ns, c.firstPod}
	if src := s.redirects[pk][c.host]; src != "" {
		return src, true
	}
	first := c.first.UnixNano()
	from := first - int64(s.cfg.RedirectWindow)
	best, bestAt := "", int64(0)
	for _, e := range s.timeline[pk] {
		if e.host == c.host || e.start > first || e.start < from {
			continue
		}
		if best == "" || e.start > bestAt || (e.start == bestAt && e.host < best) {
			best, bestAt = e.host, e.start
		}
	}
	return best, false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func sortedCands(m map[hostPort]*cand) []*cand {
	out := make([]*cand, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *cand) int { return cmp.Or(strings.Compare(a.host, b.host), cmp.Compare(a.port, b.port)) })
	return out
}
