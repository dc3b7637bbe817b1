package suggest

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
)

// Result is what Build returns: the policies and what was left out.
type Result struct {
	Policies []*Suggestion
	// Skipped counts requests left out, by why ("reason metadata",
	// "unknown clients", "IP literals", …).
	Skipped map[string]int64
	// LeftOut are hosts that needed a rule but did not get one, with why.
	LeftOut []string
	// Records is the number of records of the namespace that were read.
	Records int64
	Period  auditlog.Period
}

// Suggestion is one workload's policy and the notes for its reader.
type Suggestion struct {
	Doc      policy.Document
	Workload auditlog.Workload
	Pods     []string
	// Fallback is true when the podSelector is the fallback guess.
	Fallback bool
	// Notes[i] explains rule i (what was seen).
	Notes []string
	// Clients are the pods the self-check replayed, with the labels used.
	clients []*policy.Client
	// requests the self-check replayed: every host and port seen.
	requests []hostPort
}

// Result builds the policies and checks them (package doc).
func (s *Suggester) Result() (*Result, error) {
	res := &Result{Skipped: s.skipped, Records: s.records, Period: s.period}
	ix := (*podIndex)(nil)
	if s.cfg.Pods != nil {
		ix = newPodIndex(s.cfg.Pods)
	}
	works := make([]*workload, 0, len(s.works))
	for _, w := range s.works {
		works = append(works, w)
	}
	slices.SortFunc(works, func(a, b *workload) int {
		return cmp.Or(strings.Compare(a.ns, b.ns), strings.Compare(a.w.Kind, b.w.Kind), strings.Compare(a.w.Name, b.w.Name))
	})
	names := map[string]int{}
	for _, w := range works {
		names[w.ns+"/"+policyName(w.w, false)]++
	}
	for _, w := range works {
		sg := s.build(w, ix, names[w.ns+"/"+policyName(w.w, false)] > 1, res)
		if sg != nil {
			res.Policies = append(res.Policies, sg)
		}
	}
	if err := res.check(); err != nil {
		return nil, err
	}
	return res, nil
}

// rule is a suggested rule before it becomes a policy.EgressRule.
type rule struct {
	pattern string
	port    int
	cidrs   []netip.Prefix
	purpose string
	note    string
	covers  []*cand
}

func (s *Suggester) build(w *workload, ix *podIndex, clash bool, res *Result) *Suggestion {
	var cands []*cand
	for _, c := range sortedCands(w.cands) {
		where := fmt.Sprintf("%s %s/%s: %s", w.ns, w.w.Kind, w.w.Name, hostPort(c.hostPort).String())
		switch {
		case c.never.IsValid():
			res.LeftOut = append(res.LeftOut, fmt.Sprintf("%s: resolved to %s, which no rule may open", where, c.never))
		case len(c.private) > 0 && !c.public && len(c.cidrs) == 0:
			res.LeftOut = append(res.LeftOut, fmt.Sprintf("%s: resolved only to private addresses (%s); name their range with --cidr to suggest it", where, joinAddrs(c.private)))
		default:
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	rules := s.fold(cands)
	for _, r := range rules {
		if r.purpose == "" {
			r.purpose = "TODO"
		}
	}
	slices.SortFunc(rules, func(a, b *rule) int {
		return cmp.Or(strings.Compare(strings.TrimPrefix(a.pattern, "**."), strings.TrimPrefix(b.pattern, "**.")), cmp.Compare(a.port, b.port))
	})

	pods := sortedKeys(w.pods)
	labels := ix.labels(w.ns, w.w, pods)
	sg := &Suggestion{Workload: w.w, Pods: pods}
	if labels == nil {
		labels = map[string]string{fallbackLabel: w.w.Name}
		sg.Fallback = true
	}
	p := policy.EgressPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policy.APIVersion, Kind: policy.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: policyName(w.w, clash), Namespace: w.ns},
		Spec: policy.EgressPolicySpec{
			PodSelector:         metav1.LabelSelector{MatchLabels: labels},
			ServiceAccountNames: sortedKeys(w.sas),
		},
	}
	for _, r := range rules {
		er := policy.EgressRule{Hosts: []string{r.pattern}, Ports: []int32{int32(r.port)}, Purpose: r.purpose, Owner: "TODO"}
		for _, c := range r.cidrs {
			er.CIDRs = append(er.CIDRs, c.String())
		}
		p.Spec.Egress = append(p.Spec.Egress, er)
		sg.Notes = append(sg.Notes, r.note)
		for _, c := range r.covers {
			sg.requests = append(sg.requests, c.hostPort)
		}
	}
	sg.Doc = policy.Document{Origin: "suggested " + w.ns + "/" + p.Name, Policy: p}
	sas := sg.Doc.Policy.Spec.ServiceAccountNames
	if len(sas) == 0 {
		sas = []string{""}
	}
	for _, pod := range pods {
		for _, sa := range sas {
			sg.clients = append(sg.clients, &policy.Client{Namespace: w.ns, Pod: pod, ServiceAccount: sa, Labels: labels})
		}
	}
	return sg
}

// fold turns candidates into rules: one per host and port, except that
// Fold or more hosts under one registrable domain (on one port) become one
// "**.<common parent>" rule when the pattern passes ParsePattern (no
// public suffix) and Lint (no privately registered suffix).
func (s *Suggester) fold(cands []*cand) []*rule {
	type group struct {
		domain string
		port   int
	}
	groups := map[group][]*cand{}
	var out []*rule
	for _, c := range cands {
		d, err := publicsuffix.EffectiveTLDPlusOne(c.host)
		if err != nil || d == c.host || s.cfg.Fold < 0 {
			out = append(out, s.single(c))
			continue
		}
		g := group{d, c.port}
		groups[g] = append(groups[g], c)
	}
	keys := make([]group, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	slices.SortFunc(keys, func(a, b group) int { return cmp.Or(strings.Compare(a.domain, b.domain), cmp.Compare(a.port, b.port)) })
	for _, g := range keys {
		members := groups[g]
		if pattern, ok := s.foldPattern(g.domain, members); ok {
			r := &rule{pattern: pattern, port: g.port, covers: members}
			hosts := make([]string, len(members))
			var requests int64
			for i, c := range members {
				hosts[i] = c.host
				requests += c.requests
				for _, p := range c.cidrs {
					if !slices.Contains(r.cidrs, p) {
						r.cidrs = append(r.cidrs, p)
					}
				}
			}
			r.purpose = s.redirectPurpose(members)
			r.note = fmt.Sprintf("folds %d hosts seen: %s; %s", len(members), strings.Join(hosts, ", "), seen(members...))
			out = append(out, r)
			continue
		}
		for _, c := range members {
			out = append(out, s.single(c))
		}
	}
	return out
}

// foldPattern returns "**.<parent>" for the members, where parent is their
// longest common parent at or below the registrable domain, when there
// are at least Fold of them and the pattern passes policy's checks.
func (s *Suggester) foldPattern(domain string, members []*cand) (string, bool) {
	if s.cfg.Fold < 2 || len(members) < s.cfg.Fold {
		return "", false
	}
	parent := strings.Split(members[0].host, ".")[1:]
	for _, c := range members[1:] {
		labels := strings.Split(c.host, ".")[1:]
		for len(parent) > 0 && !slices.Equal(parent, labels[max(len(labels)-len(parent), 0):]) {
			parent = parent[1:]
		}
	}
	p := strings.Join(parent, ".")
	if p != domain && !strings.HasSuffix(p, "."+domain) {
		return "", false
	}
	pattern := "**." + p
	pat, err := policy.ParsePattern(pattern)
	if err != nil {
		return "", false
	}
	for _, c := range members {
		if !pat.Match(c.host) {
			return "", false
		}
	}
	doc := policy.Document{Origin: "fold", Policy: policy.EgressPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "fold", Namespace: "fold"},
		Spec:       policy.EgressPolicySpec{Egress: []policy.EgressRule{{Hosts: []string{pattern}, Ports: []int32{443}}}},
	}}
	if len(policy.Lint([]policy.Document{doc}, nil)) > 0 {
		return "", false // under a privately registered suffix
	}
	return pattern, true
}

func (s *Suggester) single(c *cand) *rule {
	return &rule{pattern: c.host, port: c.port, cidrs: slices.Clone(c.cidrs), purpose: s.redirectPurpose([]*cand{c}),
		note: seen(c), covers: []*cand{c}}
}

// redirectPurpose is "redirect target of H" when a record showed the
// redirect (exact), "redirect target of H?" when a member only looks like
// one by timing (the first member with a source decides), or "".
func (s *Suggester) redirectPurpose(members []*cand) string {
	for _, c := range members {
		src, exact := s.redirectSource(c.ns, c)
		switch {
		case src != "" && exact:
			return "redirect target of " + src
		case src != "":
			return "redirect target of " + src + "?"
		}
	}
	return ""
}

// seen describes what the records showed of the candidates.
func seen(cs ...*cand) string {
	var requests int64
	reasons := map[string]int64{}
	classes := map[string]int64{}
	pods := map[string]bool{}
	var private []string
	first, last := cs[0].first, cs[0].last
	for _, c := range cs {
		requests += c.requests
		for k, v := range c.reasons {
			reasons[k] += v
		}
		for k, v := range c.classes {
			classes[k] += v
		}
		for p := range c.pods {
			pods[p] = true
		}
		if c.first.Before(first) {
			first = c.first
		}
		if c.last.After(last) {
			last = c.last
		}
		if len(c.private) > 0 && c.public {
			private = append(private, c.host)
		}
	}
	var parts []string
	for _, cl := range []string{auditlog.ClassWouldDeny, auditlog.ClassDeny} {
		if classes[cl] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", classes[cl], cl))
		}
	}
	why := make([]string, 0, len(reasons))
	for _, k := range sortedKeys(boolKeys(reasons)) {
		why = append(why, fmt.Sprintf("%s=%d", k, reasons[k]))
	}
	s := fmt.Sprintf("%s (%s; %s) from %s, first %s, last %s", plural(requests, "request"), strings.Join(parts, ", "),
		strings.Join(why, " "), plural(int64(len(pods)), "pod"), first.UTC().Format("2006-01-02T15:04:05Z"), last.UTC().Format("2006-01-02T15:04:05Z"))
	if len(private) > 0 {
		s += "; " + strings.Join(private, ", ") + " also resolved to private addresses outside --cidr: those stay refused"
	}
	return s
}

func boolKeys(m map[string]int64) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// policyName is "<workload>-suggested" (with the kind when two workloads
// of a namespace share a name), within the 253 octets of an object name.
func policyName(w auditlog.Workload, withKind bool) string {
	name := strings.ToLower(w.Name)
	if withKind {
		name += "-" + strings.ToLower(w.Kind)
	}
	name = strings.Trim(name, "-.")
	if len(name) > 243 {
		name = strings.TrimRight(name[:243], "-.")
	}
	return name + "-suggested"
}

func (h hostPort) String() string {
	if strings.Contains(h.host, ":") {
		return fmt.Sprintf("[%s]:%d", h.host, h.port)
	}
	return fmt.Sprintf("%s:%d", h.host, h.port)
}

func joinAddrs(as []netip.Addr) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

// check is the self-check: every document is valid and lint-clean, its
// YAML parses back to the same documents, and the compiled snapshot allows
// every suggested request for every pod and service account seen.
func (res *Result) check() error {
	var docs []policy.Document
	for _, sg := range res.Policies {
		if err := policy.Validate(sg.Doc); err != nil {
			return fmt.Errorf("%w: %w", ErrSelfCheck, err)
		}
		docs = append(docs, sg.Doc)
	}
	if len(docs) == 0 {
		return nil
	}
	if ws := policy.Lint(docs, nil); len(ws) > 0 {
		return fmt.Errorf("%w: lint: %s", ErrSelfCheck, ws[0])
	}
	var buf bytes.Buffer
	if err := res.WriteYAML(&buf); err != nil {
		return err
	}
	parsed, err := policy.Parse("suggested", buf.Bytes())
	if err != nil || len(parsed) != len(docs) {
		return fmt.Errorf("%w: the YAML does not parse back (%d of %d documents): %v", ErrSelfCheck, len(parsed), len(docs), err)
	}
	for i := range parsed {
		got, want := &parsed[i].Policy, &docs[i].Policy
		if got.Name != want.Name || got.Namespace != want.Namespace || !reflect.DeepEqual(got.Spec, want.Spec) {
			return fmt.Errorf("%w: %s/%s reads back differently from its YAML", ErrSelfCheck, want.Namespace, want.Name)
		}
	}
	// The loader check and run use: what it accepts is what egressd enforces.
	snap, err := policy.Load([]policy.Source{{Name: "suggested", Data: buf.Bytes()}}, policy.ValidateOptions{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSelfCheck, err)
	}
	for _, sg := range res.Policies {
		for _, c := range sg.clients {
			for _, r := range sg.requests {
				d := snap.Decide(policy.DecideArgs{Client: c, Host: r.host, Port: r.port})
				if !d.Allowed() {
					return fmt.Errorf("%w: %s %s: %s for pod %s is %s (%s)", ErrSelfCheck, sg.Doc.Policy.Namespace,
						sg.Doc.Policy.Name, r, c.Pod, d.Verdict, d.Reason)
				}
			}
		}
	}
	return nil
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
