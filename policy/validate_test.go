package policy

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidate(t *testing.T) {
	ok := func() Document {
		r := rule([]int32{443}, "a.example.com")
		r.CIDRs = []string{"10.40.0.0/16", "2001:db8::/32"}
		return doc("prod", "p", metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, []string{"sa-1"}, r)
	}
	tests := []struct {
		name  string
		edit  func(*EgressPolicy)
		field string // "" = valid
		value string
		why   string
	}{
		{"valid", func(*EgressPolicy) {}, "", "", ""},
		{"no typemeta is fine", func(p *EgressPolicy) { p.TypeMeta = metav1.TypeMeta{} }, "", "", ""},
		{"wrong kind", func(p *EgressPolicy) { p.Kind = "NetworkPolicy" }, "kind", "NetworkPolicy", "want EgressPolicy"},
		{"no name", func(p *EgressPolicy) { p.Name = "" }, "metadata.name", "", "required"},
		{"bad name", func(p *EgressPolicy) { p.Name = "Bad_Name" }, "metadata.name", "Bad_Name", "RFC 1123"},
		{"no namespace", func(p *EgressPolicy) { p.Namespace = "" }, "metadata.namespace", "", "required"},
		{"namespace with dot", func(p *EgressPolicy) { p.Namespace = "a.b" }, "metadata.namespace", "a.b", "must not contain dots"},
		{"bad selector op", func(p *EgressPolicy) {
			p.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, "spec.podSelector", "", "operator"},
		{"bad selector value", func(p *EgressPolicy) {
			p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "has space"}}
		}, "spec.podSelector", "", "value"},
		{"bad SA", func(p *EgressPolicy) { p.Spec.ServiceAccountNames = []string{"ok", "Not OK"} }, "spec.serviceAccountNames[1]", "Not OK", "RFC 1123"},
		{"no rules", func(p *EgressPolicy) { p.Spec.Egress = nil }, "spec.egress", "", "at least one rule"},
		{"no hosts", func(p *EgressPolicy) { p.Spec.Egress[0].Hosts, p.Spec.Egress[0].CIDRs = nil, nil }, "spec.egress[0].hosts", "", "at least one host"},
		{"bad host", func(p *EgressPolicy) { p.Spec.Egress[0].Hosts = []string{"a.example.com", "*.com"} }, "spec.egress[0].hosts[1]", "*.com", "ICANN public suffix"},
		{"ip host", func(p *EgressPolicy) { p.Spec.Egress[0].Hosts = []string{"10.40.0.1"} }, "spec.egress[0].hosts[0]", "10.40.0.1", "cidrs"},
		{"no ports", func(p *EgressPolicy) { p.Spec.Egress[0].Ports = nil }, "spec.egress[0].ports", "", "at least one port"},
		{"port 0", func(p *EgressPolicy) { p.Spec.Egress[0].Ports = []int32{0} }, "spec.egress[0].ports[0]", "0", "1–65535"},
		{"port 65536", func(p *EgressPolicy) { p.Spec.Egress[0].Ports = []int32{443, 65536} }, "spec.egress[0].ports[1]", "65536", "1–65535"},
		{"port 65535", func(p *EgressPolicy) { p.Spec.Egress[0].Ports = []int32{1, 65535} }, "", "", ""},
		{"cidr not prefix", func(p *EgressPolicy) { p.Spec.Egress[0].CIDRs = []string{"10.40.0.0"} }, "spec.egress[0].cidrs[0]", "10.40.0.0", "not a CIDR"},
		{"cidr host bits", func(p *EgressPolicy) { p.Spec.Egress[0].CIDRs = []string{"10.40.0.1/16"} }, "spec.egress[0].cidrs[0]", "10.40.0.1/16", "write 10.40.0.0/16"},
		{"cidr mapped", func(p *EgressPolicy) { p.Spec.Egress[0].CIDRs = []string{"::ffff:10.0.0.0/104"} }, "spec.egress[0].cidrs[0]", "::ffff:10.0.0.0/104", "IPv4 prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok()
			tt.edit(&d.Policy)
			err := Validate(d)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v; want a *FieldError wrapping ErrInvalid", err)
			}
			if fe.Field != tt.field || fe.Value != tt.value || fe.Origin != d.Origin || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("FieldError %+v (%v); want field %q value %q saying %q", fe, err, tt.field, tt.value, tt.why)
			}
			if !strings.Contains(err.Error(), d.Origin) {
				t.Fatalf("%v does not name the origin", err)
			}
		})
	}
}

func TestValidateJoinsEveryProblem(t *testing.T) {
	d := doc("", "", metav1.LabelSelector{}, nil, EgressRule{Hosts: []string{"*"}, Ports: []int32{0}})
	err := Validate(d)
	for _, want := range []string{"metadata.name", "metadata.namespace", "spec.egress[0].hosts[0]", "spec.egress[0].ports[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
}

// TestParseValidateOrigin is the path a user sees: file, document, policy,
// field and value in one line.
func TestParseValidateOrigin(t *testing.T) {
	in := "apiVersion: egressd.dev/v1alpha1\nkind: EgressPolicy\nmetadata: {name: a, namespace: ns}\nspec: {egress: [{hosts: [ok.example.com], ports: [443]}, {hosts: [x.example.com, \"a*.example.com\"], ports: [443]}]}\n"
	docs, err := Parse("policies/a.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(docs)
	want := `policies/a.yaml:4:82: spec.egress[1].hosts[1]: label "a*": a wildcard must be a whole label: invalid host pattern, got "a*.example.com"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got  %v\nwant %s…", err, want)
	}
}
