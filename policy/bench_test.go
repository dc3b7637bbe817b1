package policy

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchDocs builds 10,000 rules: namespaces × policies × rules, one host
// pattern a rule, 70% exact, 20% "*.", 10% "**.". Every policy selects with
// a matchLabels and a matchExpressions requirement; every policy also
// names one shared host, so that node holds a rule of each policy.
func benchDocs(namespaces, policies, rules int) []Document {
	var docs []Document
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%d", n)
		for p := range policies {
			sel := metav1.LabelSelector{
				MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", p)},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "batch"}},
				},
			}
			var rs []EgressRule
			for r := range rules - 1 {
				rs = append(rs, rule([]int32{443, 8443}, benchPattern(p, r, rules)))
			}
			rs = append(rs, rule([]int32{443}, "api.shared.example.com"))
			docs = append(docs, doc(ns, fmt.Sprintf("policy-%04d", p), sel, nil, rs...))
		}
	}
	return docs
}

// benchPattern is the pattern of rule r of policy p: the kind cycles with
// p+r, so that every policy holds every kind.
func benchPattern(p, r, rules int) string {
	k := p*rules + r
	switch (p + r) % 10 {
	case 0, 1, 2, 3, 4, 5, 6:
		return fmt.Sprintf("svc-%d.team-%d.example.com", k, p)
	case 7, 8:
		return fmt.Sprintf("*.svc-%d.example.net", k)
	}
	return fmt.Sprintf("**.svc-%d.example.org", k)
}

// benchHost returns a host that rule r of policy p matches, for the first
// r whose pattern starts with prefix.
func benchHost(p, rules int, prefix, sub string) string {
	for r := range rules - 1 {
		if pat := benchPattern(p, r, rules); strings.HasPrefix(pat, prefix) {
			return sub + strings.TrimPrefix(pat, prefix)
		}
	}
	return "" // no such rule: the caller's check of the decision fails
}

func BenchmarkDecide(b *testing.B) {
	layouts := []struct {
		name                        string
		namespaces, policies, rules int
	}{
		{"one-namespace", 1, 500, 20},
		{"50-namespaces", 50, 20, 10},
	}
	for _, l := range layouts {
		s := mustCompile(b, benchDocs(l.namespaces, l.policies, l.rules)...)
		if s.Rules() != 10000 {
			b.Fatalf("%d rules", s.Rules())
		}
		// The client is selected by policy 7 (app-7) of namespace ns-0.
		c := testClient("ns-0", map[string]string{"app": "app-7", "tier": "web"})
		cases := []struct {
			name   string
			host   string
			port   int
			reason Reason
		}{
			{"hit-exact", benchHost(7, l.rules, "svc-", "svc-"), 443, ReasonAllowed},
			{"hit-wildcard", benchHost(7, l.rules, "*.", "x."), 443, ReasonAllowed},
			{"hit-globstar", benchHost(7, l.rules, "**.", "a.b.c."), 8443, ReasonAllowed},
			{"hit-shared", "api.shared.example.com", 443, ReasonAllowed},
			{"miss", "nothing.example.com", 443, ReasonNotAllowlisted},
			{"miss-other-policy", benchHost(8, l.rules, "svc-", "svc-"), 443, ReasonNotAllowlisted},
			// Worst case: a host every policy of the namespace names, asked
			// by a pod none of them selects: one selector test per policy.
			{"shared-not-selected", "api.shared.example.com", 443, ReasonNotAllowlisted},
			{"port-not-allowed", benchHost(7, l.rules, "svc-", "svc-"), 80, ReasonPortNotAllowed},
		}
		stranger := testClient("ns-0", map[string]string{"app": "none", "tier": "web"})
		for _, tc := range cases {
			a := DecideArgs{Client: c, Host: tc.host, Port: tc.port}
			if tc.name == "shared-not-selected" {
				a.Client = stranger
			}
			if d := s.Decide(a); d.Reason != tc.reason {
				b.Fatalf("%s %s: %+v, want %s", l.name, tc.name, d, tc.reason)
			}
			b.Run(l.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s.Decide(a)
				}
			})
		}
	}
}

func BenchmarkNormalizeHost(b *testing.B) {
	for _, h := range []string{"Models.Example.COM.", "bücher.example"} {
		b.Run(h, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = NormalizeHost(h)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	docs := benchDocs(1, 500, 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(docs); err != nil {
			b.Fatal(err)
		}
	}
}
