package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks one document against the contract. The error names the
// origin, field and value, and joins every problem found; each is a
// *FieldError wrapping ErrInvalid.
//
// Checked: apiVersion and kind when set (objects from a typed informer
// carry none); metadata.name (DNS-1123 subdomain) and metadata.namespace
// (DNS-1123 label), both required; podSelector (an omitted selector is {}:
// every pod of the namespace, as in NetworkPolicy); serviceAccountNames;
// spec.mode audit, enforce or empty; at least one egress rule; per rule
// at least one host pattern (ParsePattern) or, for an address rule, cidrs
// alone; a rule's name, when set, a DNS-1123 label unique within the
// policy; phase init or empty; ech allow or empty; at least one port in 1–65535, and cidrs in masked prefix
// form ("10.40.0.0/16", not "10.40.0.1/16"), IPv4 written as IPv4.
func Validate(doc Document) error { return ValidateWith(doc, ValidateOptions{}) }

// ValidateWith is Validate for an instance described by opts: a rule with
// inspect: true is valid only when opts.InspectAvailable. Its http entries
// are checked too: they need inspect: true; methods are upper case;
// paths are clean absolute paths with an optional final "/*" or "/**".
func ValidateWith(doc Document, opts ValidateOptions) error {
	v := validator{doc: &doc, opts: opts}
	p := &doc.Policy
	if p.APIVersion != "" && p.APIVersion != APIVersion {
		v.add("apiVersion", p.APIVersion, fmt.Errorf("want %s", APIVersion))
	}
	if p.Kind != "" && p.Kind != Kind {
		v.add("kind", p.Kind, fmt.Errorf("want %s", Kind))
	}
	v.dns("metadata.name", p.Name, validation.IsDNS1123Subdomain)
	v.dns("metadata.namespace", p.Namespace, validation.IsDNS1123Label)
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err != nil {
		v.add("spec.podSelector", "", err)
	}
	for i, sa := range p.Spec.ServiceAccountNames {
		v.dns(fmt.Sprintf("spec.serviceAccountNames[%d]", i), sa, validation.IsDNS1123Subdomain)
	}
	switch p.Spec.Mode {
	case "", ModeAudit, ModeEnforce:
	default:
		v.add("spec.mode", string(p.Spec.Mode), fmt.Errorf("want %q or %q", ModeAudit, ModeEnforce))
	}
	if len(p.Spec.Egress) == 0 {
		v.add("spec.egress", "", errors.New("at least one rule is required (a policy without rules allows nothing)"))
	}
	names := make(map[string]int, len(p.Spec.Egress))
	for i := range p.Spec.Egress {
		field := fmt.Sprintf("spec.egress[%d]", i)
		v.rule(field, &p.Spec.Egress[i])
		if n := p.Spec.Egress[i].Name; n != "" {
			if j, dup := names[n]; dup {
				v.add(field+".name", n, fmt.Errorf("spec.egress[%d] has this name already: a rule name is unique within its policy", j))
			}
			names[n] = i
		}
	}
	return v.err()
}

type validator struct {
	doc  *Document
	opts ValidateOptions
	errs []error
}

func (v *validator) add(field, value string, err error) {
	fe := &FieldError{Origin: v.doc.Origin, Field: field, Value: value, Err: err}
	if w := v.doc.where(field); w != v.doc.Origin {
		fe.Where = w
	}
	v.errs = append(v.errs, fe)
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func (v *validator) dns(field, value string, check func(string) []string) {
	if value == "" {
		v.add(field, "", errors.New("required"))
		return
	}
	if msgs := check(value); len(msgs) > 0 {
		v.add(field, value, errors.New(strings.Join(msgs, "; ")))
	}
}

func (v *validator) rule(field string, r *EgressRule) {
	if r.Name != "" {
		v.dns(field+".name", r.Name, validation.IsDNS1123Label)
	}
	if len(r.Hosts) == 0 && len(r.CIDRs) == 0 {
		v.add(field+".hosts", "", errors.New("at least one host pattern is required (or cidrs alone: an address rule)"))
	}
	switch r.Phase {
	case "", PhaseInit:
	default:
		v.add(field+".phase", r.Phase, fmt.Errorf("want %q or empty", PhaseInit))
	}
	switch r.ECH {
	case "", ECHAllow:
	default:
		v.add(field+".ech", r.ECH, fmt.Errorf("want %q or empty", ECHAllow))
	}
	for i, h := range r.Hosts {
		if _, err := parsePattern(h); err != nil {
			v.add(fmt.Sprintf("%s.hosts[%d]", field, i), h, err)
		}
	}
	if len(r.Ports) == 0 {
		v.add(field+".ports", "", errors.New("at least one port is required"))
	}
	for i, p := range r.Ports {
		if p < 1 || p > 65535 {
			v.add(fmt.Sprintf("%s.ports[%d]", field, i), strconv.Itoa(int(p)), errors.New("a port is 1–65535"))
		}
	}
	for i, c := range r.CIDRs {
		if _, err := parseCIDR(c); err != nil {
			v.add(fmt.Sprintf("%s.cidrs[%d]", field, i), c, err)
		}
	}
	v.inspect(field, r)
	v.credential(field, r)
}

// parseCIDR parses a rule's cidr: a prefix in masked form, IPv4 as IPv4
// (an IPv4-mapped IPv6 prefix would never contain the unmapped addresses
// the guard compares).
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR prefix: %w", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("an IPv4-mapped IPv6 prefix: write the IPv4 prefix")
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("host bits set: write %s", m)
	}
	return p, nil
}
