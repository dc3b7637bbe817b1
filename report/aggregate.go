package report

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// Config selects and bounds what a report counts. The zero Config counts
// every record except egressd probe's.
type Config struct {
	// Since and Until bound the period: a request counts when it was open
	// at some time in [Since, Until] (its end record's time is not before
	// Since and its start not after Until). Zero means unbounded.
	Since, Until time.Time
	// Namespace keeps the records of one namespace; empty means all.
	// Unknown clients have no namespace and are kept (egressd serves one
	// namespace, and a source no pod held is worth seeing in any report).
	Namespace string
	// Workload keeps the records of one workload ("Deployment/llm");
	// the kind is matched without regard to case. Zero means all; a
	// workload filter drops unknown clients.
	Workload auditlog.Workload
	// Verdict keeps one verdict class (ClassAllow, ClassDeny,
	// ClassWouldDeny); empty means all.
	Verdict string
	// Probes counts records of egressd probe too; by default they are left
	// out (counted in Stats.Probes), since its negative controls would fill
	// the denial summary.
	Probes bool
	// Policies, when not nil, are the policies whose unused rules the
	// summary lists (from --policy or --kube).
	Policies []policy.Document
	// MaxDestinations bounds the destinations kept per workload (and the
	// unknown clients kept); requests beyond it are counted in one "other"
	// row. Zero means 10,000: memory stays bounded when a workload asks for
	// a million random names (a DNS tunnel).
	MaxDestinations int
	// MaxSet bounds the pods, peers and hosts listed per row; zero means 64.
	MaxSet int
}

// Validate checks the options.
func (c Config) Validate() error {
	switch c.Verdict {
	case "", auditlog.ClassAllow, auditlog.ClassDeny, auditlog.ClassWouldDeny:
	default:
		return fmt.Errorf("%w: verdict %q: want allow, deny or would-deny", ErrOptions, c.Verdict)
	}
	if (c.Workload.Kind == "") != (c.Workload.Name == "") {
		return fmt.Errorf("%w: workload %q: want KIND/NAME", ErrOptions, c.Workload.String())
	}
	if !c.Since.IsZero() && !c.Until.IsZero() && c.Until.Before(c.Since) {
		return fmt.Errorf("%w: --until is before --since", ErrOptions)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxDestinations <= 0 {
		c.MaxDestinations = 10000
	}
	if c.MaxSet <= 0 {
		c.MaxSet = 64
	}
	return c
}

// ParseWorkload parses "KIND/NAME".
func ParseWorkload(s string) (auditlog.Workload, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return auditlog.Workload{}, fmt.Errorf("%w: workload %q: want KIND/NAME, as Deployment/llm-server", ErrOptions, s)
	}
	return auditlog.Workload{Kind: kind, Name: name}, nil
}

// Aggregator counts records into a Report. Its memory depends on the
// distinct workloads, destinations and values it sees (each bounded by
// Config), not on the number of records.
type Aggregator struct {
	cfg      Config
	stats    *auditlog.Stats
	merger   *auditlog.Merger
	works    map[wkey]*workAgg
	unknown  map[string]*unknownAgg
	period   auditlog.Period
	counts   Counts
	denials  tally
	wouldDen tally
	outcomes tally
	ruleIDs  map[ruleKey]string
}

type ruleKey struct {
	policy string
	rule   int
	name   string
}

type wkey struct{ ns, kind, name string }

type dkey struct {
	host string
	port int
	dns  bool
}

type workAgg struct {
	out       WorkloadReport
	pods      set
	sas       set
	dests     map[dkey]*destAgg
	other     *destAgg
	redirects map[[2]string]*Redirect
}

type destAgg struct {
	out      Destination
	reasons  tally
	outcomes tally
	tls      tally
	status   tally
	creds    tally
	rules    set
	peers    set
}

type unknownAgg struct {
	out   UnknownClient
	hosts set
}

// NewAggregator returns an Aggregator; stats receives the merge counts.
func NewAggregator(cfg Config, stats *auditlog.Stats) *Aggregator {
	a := &Aggregator{
		cfg:     cfg.withDefaults(),
		stats:   stats,
		works:   map[wkey]*workAgg{},
		unknown: map[string]*unknownAgg{},
		ruleIDs: map[ruleKey]string{},
	}
	a.merger = auditlog.NewMerger(stats, a.count)
	return a
}

// Add takes one record as read.
func (a *Aggregator) Add(r *auditlog.Record) {
	if !a.keep(r) {
		return
	}
	a.merger.Add(r)
}

// keep applies the filters.
func (a *Aggregator) keep(r *auditlog.Record) bool {
	c := &a.cfg
	if r.Probe != "" && !c.Probes {
		a.stats.Probes++
		return false
	}
	ok := (c.Since.IsZero() || !r.Time.Before(c.Since)) &&
		(c.Until.IsZero() || !r.Start.After(c.Until)) &&
		(c.Verdict == "" || r.Class() == c.Verdict)
	if ok && (c.Namespace != "" || c.Workload.Kind != "") {
		w, known := r.WorkloadOf()
		switch {
		case !known || r.Reason == string(policy.ReasonUnknownClient):
			ok = c.Workload.Kind == ""
		default:
			ok = (c.Namespace == "" || r.Client.Namespace == c.Namespace) &&
				(c.Workload.Kind == "" || (strings.EqualFold(w.Kind, c.Workload.Kind) && w.Name == c.Workload.Name))
		}
	}
	if !ok {
		a.stats.Filtered++
	}
	return ok
}

// count adds a merged record (an end record, or an open interim one).
func (a *Aggregator) count(r *auditlog.Record) {
	n := r.Requests()
	class := r.Class()
	addCounts(&a.counts, class, n)
	widen(&a.period.From, &a.period.To, r.Start, r.Time)
	switch class {
	case auditlog.ClassDeny:
		a.denials.add(r.Reason, n)
	case auditlog.ClassWouldDeny:
		a.wouldDen.add(r.Reason, n)
	}
	if r.Outcome != "" {
		a.outcomes.add(r.Outcome, n)
	}
	if r.Unknown() {
		a.countUnknown(r, n)
		return
	}
	w, _ := r.WorkloadOf()
	k := wkey{r.Client.Namespace, w.Kind, w.Name}
	wa := a.works[k]
	if wa == nil {
		wa = &workAgg{dests: map[dkey]*destAgg{}, redirects: map[[2]string]*Redirect{}}
		wa.out.Namespace, wa.out.Workload = k.ns, w
		a.works[k] = wa
	}
	wa.pods.add(r.Client.Pod, a.cfg.MaxSet)
	wa.sas.add(r.Client.ServiceAccount, a.cfg.MaxSet)
	addCounts(&wa.out.Counts, class, n)
	widen(&wa.out.FirstSeen, &wa.out.LastSeen, r.Start, r.Time)
	sent, received := wireBytes(r)
	wa.out.BytesSent += sent
	wa.out.BytesReceived += received

	dk := dkey{host: r.Host, port: r.Port, dns: r.Kind == record.KindDNS}
	if dk.dns {
		dk.port = 0
	}
	d := wa.dests[dk]
	if d == nil {
		if len(wa.dests) >= a.cfg.MaxDestinations {
			if wa.other == nil {
				wa.other = &destAgg{out: Destination{Host: "(other destinations)"}}
			}
			d = wa.other
		} else {
			d = &destAgg{out: Destination{Host: dk.host, Port: dk.port, DNS: dk.dns}}
			wa.dests[dk] = d
		}
	}
	rule := ""
	if r.Policy != "" && r.Rule != nil && *r.Rule >= 0 {
		// One string per rule, not per record.
		k := ruleKey{r.Policy, *r.Rule, r.RuleName}
		if rule = a.ruleIDs[k]; rule == "" {
			rule = ruleID(r.Policy, *r.Rule, r.RuleName)
			a.ruleIDs[k] = rule
		}
	}
	d.add(r, class, n, rule, a.cfg.MaxSet)
	if h := r.HTTP; h != nil && h.Status >= 300 && h.Status < 400 && h.RedirectHost != "" {
		wa.addRedirect(r.Host, h.RedirectHost, n, a.cfg.MaxDestinations)
	}
}

func (d *destAgg) add(r *auditlog.Record, class string, n int64, rule string, maxSet int) {
	addCounts(&d.out.Counts, class, n)
	widen(&d.out.FirstSeen, &d.out.LastSeen, r.Start, r.Time)
	sent, received := wireBytes(r)
	d.out.BytesSent += sent
	d.out.BytesReceived += received
	d.reasons.add(r.Reason, n)
	if r.Outcome != "" {
		d.outcomes.add(r.Outcome, n)
	}
	if r.TLS != nil && r.TLS.Result != "" {
		d.tls.add(r.TLS.Result, n)
	}
	if h := r.HTTP; h != nil && h.Status >= 100 && h.Status < len(statusCodes) {
		d.status.add(statusCodes[h.Status], n)
	}
	if h := r.HTTP; h != nil && h.Credential != "" {
		d.creds.add(h.Credential, n)
	}
	d.rules.add(rule, maxSet)
	if r.Peer != "" {
		d.peers.add(peerIP(r.Peer), maxSet)
	}
	if r.Open {
		d.out.Open += n
	}
}

func (a *Aggregator) countUnknown(r *auditlog.Record, n int64) {
	u := a.unknown[r.Client.IP]
	if u == nil {
		ip := r.Client.IP
		if len(a.unknown) >= a.cfg.MaxDestinations {
			ip = "(other addresses)"
			u = a.unknown[ip]
		}
		if u == nil {
			u = &unknownAgg{out: UnknownClient{IP: ip}}
			a.unknown[ip] = u
		}
	}
	u.out.Requests += n
	widen(&u.out.FirstSeen, &u.out.LastSeen, r.Start, r.Time)
	host := r.Host
	if r.Port != 0 && r.Kind != record.KindDNS {
		host = hostPort(r.Host, r.Port)
	}
	u.hosts.add(host, a.cfg.MaxSet)
}

// Report finishes: it counts the requests still open and builds the
// report. The Aggregator must not be used afterwards.
func (a *Aggregator) Report() *Report {
	a.merger.Flush()
	rep := &Report{
		Period:         a.period,
		Filters:        a.filters(),
		Input:          *a.stats,
		Workloads:      []*WorkloadReport{},
		UnknownClients: []*UnknownClient{},
	}
	s := &rep.Summary
	s.Counts = a.counts
	s.DenialsByReason = a.denials.m()
	s.WouldDenyByReason = a.wouldDen.m()
	s.Outcomes = a.outcomes.m()
	s.NegativeControls = []NegativeControl{}
	used := map[string][]string{} // rule id → hosts it allowed
	for _, wa := range a.works {
		w := &wa.out
		w.Pods, w.PodsTruncated = wa.pods.list()
		w.ServiceAccounts, _ = wa.sas.list()
		w.Destinations = make([]*Destination, 0, len(wa.dests))
		for _, d := range wa.dests {
			w.Destinations = append(w.Destinations, d.finish())
			for _, id := range d.rules.items {
				used[id] = append(used[id], d.out.Host)
			}
			for _, reason := range []policy.Reason{policy.ReasonMetadata, policy.ReasonLinkLocal} {
				if c := d.out.Reasons[string(reason)]; c > 0 {
					s.NegativeControls = append(s.NegativeControls, NegativeControl{
						Namespace: w.Namespace, Workload: w.Workload, Host: d.out.Host, Port: d.out.Port,
						Reason: string(reason), Count: c, FirstSeen: d.out.FirstSeen, LastSeen: d.out.LastSeen,
					})
				}
			}
		}
		slices.SortFunc(w.Destinations, func(x, y *Destination) int {
			return cmp.Or(strings.Compare(x.Host, y.Host), cmp.Compare(x.Port, y.Port), boolCmp(x.DNS, y.DNS))
		})
		if wa.other != nil {
			w.Other = wa.other.finish()
		}
		w.Redirects = wa.redirectList()
		rep.Workloads = append(rep.Workloads, w)
	}
	slices.SortFunc(rep.Workloads, func(x, y *WorkloadReport) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name))
	})
	s.Workloads = len(rep.Workloads)
	slices.SortFunc(s.NegativeControls, func(x, y NegativeControl) int {
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Workload.String(), y.Workload.String()),
			strings.Compare(x.Host, y.Host), cmp.Compare(x.Port, y.Port), strings.Compare(x.Reason, y.Reason))
	})
	for _, u := range a.unknown {
		u.out.Hosts, u.out.HostsTruncated = u.hosts.list()
		slices.Sort(u.out.Hosts)
		rep.UnknownClients = append(rep.UnknownClients, &u.out)
	}
	slices.SortFunc(rep.UnknownClients, func(x, y *UnknownClient) int { return strings.Compare(x.IP, y.IP) })
	if a.cfg.Policies != nil {
		s.UnusedRules, s.PoliciesChecked = unusedRules(a.cfg.Policies, a.cfg.Namespace, used)
	}
	rep.Input = *a.stats
	return rep
}

func (a *Aggregator) filters() Filters {
	f := Filters{Namespace: a.cfg.Namespace, Verdict: a.cfg.Verdict, Probes: a.cfg.Probes}
	if !a.cfg.Since.IsZero() {
		t := a.cfg.Since.UTC()
		f.Since = &t
	}
	if !a.cfg.Until.IsZero() {
		t := a.cfg.Until.UTC()
		f.Until = &t
	}
	if a.cfg.Workload.Kind != "" {
		f.Workload = a.cfg.Workload.String()
	}
	return f
}

func (d *destAgg) finish() *Destination {
	d.out.Reasons = d.reasons.m()
	if len(d.outcomes) > 0 {
		d.out.Outcomes = d.outcomes.m()
	}
	if len(d.tls) > 0 {
		d.out.TLS = d.tls.m()
	}
	if len(d.status) > 0 {
		d.out.HTTPStatus = d.status.m()
	}
	if len(d.creds) > 0 {
		d.out.Credentials = d.creds.m()
	}
	d.out.Rules, _ = d.rules.list()
	slices.Sort(d.out.Rules)
	d.out.Peers, d.out.PeersTruncated = d.peers.list()
	slices.Sort(d.out.Peers)
	return &d.out
}

// unusedRules lists the rules of docs (of namespace ns, when given) that
// no counted request was decided by, and the host entries of used rules
// that no such request matched.
func unusedRules(docs []policy.Document, ns string, used map[string][]string) ([]UnusedRule, int) {
	out := []UnusedRule{}
	checked := 0
	for _, d := range docs {
		p := &d.Policy
		if ns != "" && p.Namespace != ns {
			continue
		}
		checked++
		id := p.Namespace + "/" + p.Name
		for i, rule := range p.Spec.Egress {
			u := UnusedRule{Policy: id, Rule: i, Name: rule.Name, Ports: rule.Ports, Purpose: rule.Purpose, Owner: rule.Owner}
			hosts, ok := used[ruleID(id, i, rule.Name)]
			if !ok {
				u.Whole, u.Hosts, u.CIDRs = true, rule.Hosts, rule.CIDRs
				out = append(out, u)
				continue
			}
			for _, h := range rule.Hosts {
				pat, err := policy.ParsePattern(h)
				if err != nil {
					continue
				}
				if !slices.ContainsFunc(hosts, pat.Match) {
					u.Hosts = append(u.Hosts, h)
				}
			}
			if len(u.Hosts) > 0 {
				out = append(out, u)
			}
		}
	}
	slices.SortFunc(out, func(x, y UnusedRule) int {
		return cmp.Or(strings.Compare(x.Policy, y.Policy), cmp.Compare(x.Rule, y.Rule))
	})
	return out, checked
}

// ruleID identifies a rule across edits of its policy: by its name when it
// has one (a rule inserted before it shifts its index, not its name), else
// by its index.
func ruleID(policyID string, rule int, name string) string {
	if name != "" {
		return policyID + "#" + name
	}
	return policyID + "#" + strconv.Itoa(rule)
}

func addCounts(c *Counts, class string, n int64) {
	c.Requests += n
	switch class {
	case auditlog.ClassAllow:
		c.Allowed += n
	case auditlog.ClassDeny:
		c.Denied += n
	case auditlog.ClassWouldDeny:
		c.WouldDeny += n
	}
}

// widen extends [from, to] to hold [start, end].
func widen(from, to *time.Time, start, end time.Time) {
	if !start.IsZero() && (from.IsZero() || start.Before(*from)) {
		*from = start
	}
	if end.After(*to) {
		*to = end
	}
}

// peerIP returns the address of "ip:port" or "[v6]:port".
func peerIP(peer string) string {
	if i := strings.LastIndexByte(peer, ':'); i > 0 {
		host := peer[:i]
		if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
			return host[1 : len(host)-1]
		}
		if !strings.Contains(host, ":") {
			return host
		}
	}
	return peer
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// tally counts by name; a handful of names per row (reasons, outcomes,
// TLS results), so a slice searched in order beats a map.
type tally []struct {
	name string
	n    int64
}

func (t *tally) add(name string, n int64) {
	for i := range *t {
		if (*t)[i].name == name {
			(*t)[i].n += n
			return
		}
	}
	*t = append(*t, struct {
		name string
		n    int64
	}{name, n})
}

func (t tally) m() map[string]int64 {
	out := make(map[string]int64, len(t))
	for _, e := range t {
		out[e.name] += e.n
	}
	return out
}

// set keeps up to max distinct strings and whether more were seen.
type set struct {
	items []string
	more  bool
}

func (s *set) add(v string, max int) {
	if v == "" || slices.Contains(s.items, v) {
		return
	}
	if len(s.items) >= max {
		s.more = true
		return
	}
	s.items = append(s.items, v)
}

func (s *set) list() ([]string, bool) {
	out := slices.Clone(s.items)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out, s.more
}

// Build reads every input in order and returns the report.
func Build(cfg Config, inputs []auditlog.Input) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rd, err := auditlog.NewReader(0, Unread...)
	if err != nil {
		return nil, err
	}
	agg := NewAggregator(cfg, &rd.Stats)
	for _, in := range inputs {
		if err := rd.Read(in, agg.Add); err != nil {
			return nil, err
		}
	}
	return agg.Report(), nil
}
