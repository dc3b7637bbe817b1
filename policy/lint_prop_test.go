package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLintRedundantChangesNoDecision is the property behind the shadow
// lint: for generated policies of two and three rules, whenever Lint says
// a rule is shadowed or a duplicate, the policy without that rule decides
// every generated request exactly as the policy with it (verdict, reason,
// audit softening, ech, inspection, the cidrs the guard may open, and the
// decision of requests inside an inspected tunnel).
func TestLintRedundantChangesNoDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 4))
	hosts := []string{"a.example.com", "b.example.com", "*.example.com", "**.example.com", "a.*.example.org", "x.y.example.org"}
	portSets := [][]int32{{443}, {80}, {443, 80}, {443, 8443}}
	cidrSets := [][]string{nil, {"10.0.0.0/24"}, {"10.0.0.0/8"}}
	httpSets := [][]HTTPRule{nil, {{Methods: []string{"GET"}}}, {{Paths: []string{"/v1/**"}}}}
	modes := []Mode{"", ModeAudit, ModeEnforce}
	genRule := func() EgressRule {
		r := EgressRule{Ports: portSets[rng.IntN(len(portSets))], CIDRs: cidrSets[rng.IntN(len(cidrSets))]}
		for range 1 + rng.IntN(2) {
			r.Hosts = append(r.Hosts, hosts[rng.IntN(len(hosts))])
		}
		if rng.IntN(3) == 0 {
			r.Phase = PhaseInit
		}
		if rng.IntN(4) == 0 {
			r.ECH = ECHAllow
		}
		if rng.IntN(3) == 0 {
			r.Inspect = true
			r.HTTP = httpSets[rng.IntN(len(httpSets))]
		}
		return r
	}
	reqHosts := []string{"a.example.com", "b.example.com", "c.example.com", "d.c.example.com", "example.com", "a.b.example.org", "x.y.example.org", "other.net"}
	reqPorts := []int{443, 80, 8443, 22}
	opts := ValidateOptions{InspectAvailable: true}
	claims := 0
	for n := 0; n < 3000 && claims < 400; n++ {
		rules := []EgressRule{genRule(), genRule()}
		if n%2 == 1 {
			rules = append(rules, genRule())
		}
		d := doc("ns", "p", metav1.LabelSelector{}, nil, rules...)
		d.Policy.Spec.Mode = modes[rng.IntN(len(modes))]
		if ValidateWith(d, opts) != nil {
			continue
		}
		with, err := CompileWith([]Document{d}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range Lint([]Document{d}, nil) {
			var i int
			var rest string
			if _, err := fmt.Sscanf(w.Message, "spec.egress[%d] %s", &i, &rest); err != nil || (rest != "duplicates" && rest != "is") {
				continue
			}
			claims++
			less := d
			less.Policy.Spec.Egress = slices.Delete(slices.Clone(rules), i, i+1)
			without, err := CompileWith([]Document{less}, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, init := range []bool{false, true} {
				c := testClient("ns", nil)
				c.Initialized = init
				for _, h := range reqHosts {
					for _, p := range reqPorts {
						for _, m := range []Mode{ModeAudit, ModeEnforce} {
							a := DecideArgs{Client: c, Host: h, Port: p, Mode: m}
							x, y := with.Decide(a), without.Decide(a)
							if got, want := effect(without, y), effect(with, x); got != want {
								t.Fatalf("%s\nrules %+v\nrequest %s:%d initialized %v mode %s:\n with: %s\n without: %s", w, rules, h, p, init, m, want, got)
							}
						}
					}
				}
			}
		}
	}
	if claims < 50 {
		t.Fatalf("only %d redundant claims generated: the generator does not exercise the lint", claims)
	}
}

// effect is what a decision does to a request, without the rule's
// identity (index, purpose, owner), which deleting a rule may change.
func effect(s *Snapshot, d Decision) string {
	cidrs := slices.Clone(d.CIDRs)
	slices.SortFunc(cidrs, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr())*64 + a.Bits() - b.Bits() })
	out := fmt.Sprintf("%s %s would_deny=%v mode=%s ech=%v inspect=%v cidrs=%v", d.Verdict, d.Reason, d.WouldDeny, d.Mode, d.ECH, s.Inspects(d), cidrs)
	for _, m := range []string{"GET", "POST"} {
		for _, p := range []string{"/v1/models", "/other"} {
			r := s.DecideRequest(d, m, p)
			out += fmt.Sprintf(" %s %s: %s %s %v;", m, p, r.Verdict, r.Reason, r.WouldDeny)
		}
	}
	return out
}
