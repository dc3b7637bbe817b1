package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Snapshot is a compiled, immutable set of policies, safe for concurrent use.
// The zero value and nil deny everything.
type Snapshot struct {
	docs  []Document       // sorted by namespace/name
	pols  []compiledPolicy // same order as docs
	rules []compiledRule   // by policy, then rule index: the order of precedence
	ns    map[string]*nsIndex
	// polByID finds a Decision's policy (for DecideRequest).
	polByID map[string]int32
}

type compiledPolicy struct {
	id       string // "namespace/name", as Decision.Policy
	selector labels.Selector
	all      bool     // the selector is {}: skip matching
	sas      []string // serviceAccountNames; empty means any
	mode     Mode     // spec.mode; empty means the instance's mode
	// generation is Decision.PolicyGeneration.
	generation string
	// firstRule is the number in Snapshot.rules of the policy's rule 0.
	firstRule int32
}

type compiledRule struct {
	pol     int32
	index   int    // in its policy's spec.egress
	name    string // its name; empty if none
	ports   []uint16
	cidrs   []netip.Prefix
	purpose string
	owner   string
	// initOnly: phase init, matches only while the pod is not Initialized.
	initOnly bool
	ech      bool // ech: allow
	inspect  bool // inspect: true
	http     []compiledHTTP
	// credential: the rule's, defaults applied; nil if none.
	credential *Credential
}

// nsIndex holds the rules of one namespace: a policy selects only pods of
// its own namespace, so a decision never looks at another one.
type nsIndex struct {
	root  node
	cidrs []int32 // address rules (cidrs, no hosts), ascending, for IP-literal hosts
	pols  []int32 // the namespace's policies, ascending
	// anyAudit: a policy of the namespace says mode: audit; anyUnset: one
	// has no mode (it takes the instance's). Decide scans the policies for
	// the client's mode only when these say it can be audit.
	anyAudit, anyUnset bool
}

// Compile validates every document and builds an immutable snapshot. Any
// invalid document makes the whole compile fail (callers keep the previous
// snapshot in force). Two documents with one namespace/name are an error
// wrapping ErrDuplicatePolicy.
func Compile(docs []Document) (*Snapshot, error) { return CompileWith(docs, ValidateOptions{}) }

// CompileWith is Compile for an instance described by opts (ValidateWith).
func CompileWith(docs []Document, opts ValidateOptions) (*Snapshot, error) {
	var errs []error
	seen := make(map[string]string, len(docs))
	for _, d := range docs {
		if err := ValidateWith(d, opts); err != nil {
			errs = append(errs, err)
			continue
		}
		id := d.Policy.Namespace + "/" + d.Policy.Name
		if prev, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("%w %s: in %s and in %s", ErrDuplicatePolicy, id, prev, d.Origin))
			continue
		}
		seen[id] = d.Origin
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Snapshot{
		docs: slices.Clone(docs),
		pols: make([]compiledPolicy, 0, len(docs)),
		ns:   make(map[string]*nsIndex),

		polByID: make(map[string]int32, len(docs)),
	}
	// Precedence when several rules allow: policies by namespace/name,
	// then rule index. Rule numbers in s.rules follow it, so the smallest
	// allowing number wins.
	slices.SortFunc(s.docs, func(a, b Document) int {
		return cmp.Or(cmp.Compare(a.Policy.Namespace, b.Policy.Namespace), cmp.Compare(a.Policy.Name, b.Policy.Name))
	})
	for pi := range s.docs {
		if err := s.add(int32(pi), &s.docs[pi].Policy); err != nil {
			// Validate passed, so this is a bug, not bad input.
			return nil, fmt.Errorf("policy: %s: %w", s.docs[pi].Origin, err)
		}
	}
	return s, nil
}

func (s *Snapshot) add(pi int32, p *EgressPolicy) error {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return err
	}
	s.pols = append(s.pols, compiledPolicy{
		id:       p.Namespace + "/" + p.Name,
		selector: sel,
		all:      sel.Empty(),
		sas:      slices.Clone(p.Spec.ServiceAccountNames),
		mode:     p.Spec.Mode,

		generation: PolicyGeneration(p),

		firstRule: int32(len(s.rules)),
	})
	s.polByID[p.Namespace+"/"+p.Name] = pi
	idx := s.ns[p.Namespace]
	if idx == nil {
		idx = &nsIndex{}
		s.ns[p.Namespace] = idx
	}
	idx.pols = append(idx.pols, pi)
	switch p.Spec.Mode {
	case ModeAudit:
		idx.anyAudit = true
	case "":
		idx.anyUnset = true
	}
	for ri, r := range p.Spec.Egress {
		cr := compiledRule{pol: pi, index: ri, name: r.Name, purpose: r.Purpose, owner: r.Owner,
			initOnly: r.Phase == PhaseInit, ech: r.ECH == ECHAllow, inspect: r.Inspect}
		if r.Inspect {
			h, err := compileHTTP(r.HTTP)
			if err != nil {
				return err
			}
			cr.http = h
			cr.credential = r.Credential.withDefaults()
		}
		for _, port := range r.Ports {
			cr.ports = append(cr.ports, uint16(port))
		}
		for _, c := range r.CIDRs {
			pfx, err := parseCIDR(c)
			if err != nil {
				return err
			}
			cr.cidrs = append(cr.cidrs, pfx)
		}
		num := int32(len(s.rules))
		s.rules = append(s.rules, cr)
		if len(cr.cidrs) > 0 && len(r.Hosts) == 0 {
			idx.cidrs = append(idx.cidrs, num)
		}
		for _, h := range r.Hosts {
			pat, err := parsePattern(h)
			if err != nil {
				return err
			}
			idx.root.insert(pat.labels, num)
		}
	}
	return nil
}

// Policies returns the documents the snapshot was compiled from, sorted by
// namespace/name (the order of precedence). The slice is a copy.
func (s *Snapshot) Policies() []Document {
	if s == nil {
		return nil
	}
	return slices.Clone(s.docs)
}

// Len returns the number of policies in the snapshot.
func (s *Snapshot) Len() int {
	if s == nil {
		return 0
	}
	return len(s.docs)
}

// Rules returns the number of egress rules in the snapshot.
func (s *Snapshot) Rules() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// selects reports whether the policy selects the client (the namespace is
// already equal: the index is per namespace). It does not allocate:
// labels.Set is the map itself.
func (p *compiledPolicy) selects(c *Client) bool {
	if len(p.sas) > 0 && !slices.Contains(p.sas, c.ServiceAccount) {
		return false
	}
	return p.all || p.selector.Matches(labels.Set(c.Labels))
}

// allowsPort reports whether the rule lists port; port 0 asks "any port".
func (r *compiledRule) allowsPort(port int) bool {
	if port == 0 {
		return true
	}
	for _, p := range r.ports {
		if int(p) == port {
			return true
		}
	}
	return false
}

// PolicyGeneration names the version of a policy: its metadata.generation
// when it has one (a custom resource), otherwise (a file) the first 12 hex
// digits of the SHA-256 of its namespace, name and spec, so that records
// say which version of a policy decided them and an edit gives another.
func PolicyGeneration(p *EgressPolicy) string {
	if p.Generation > 0 {
		return strconv.FormatInt(p.Generation, 10)
	}
	b, err := json.Marshal(struct {
		Namespace, Name string
		Spec            EgressPolicySpec
	}{p.Namespace, p.Name, p.Spec})
	if err != nil {
		return "" // a spec of strings and numbers always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
