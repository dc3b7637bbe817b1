package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fuzzLabels are the labels generated patterns and hosts are built from:
// few, so that generated hosts often match generated patterns.
var fuzzLabels = [...]string{"a", "b", "c", "x-y", "*", "**"}

// fuzzTails are the fixed right parts of generated patterns and hosts.
var fuzzTails = [...]string{"example.com", "b.example.com", "example.org"}

// fuzzName builds a name or pattern from bytes: the low bits pick labels
// (only plain ones when wild is false), the first byte the tail.
func fuzzName(b []byte, wild bool) string {
	if len(b) == 0 {
		return ""
	}
	n := len(fuzzLabels)
	if !wild {
		n -= 2
	}
	parts := make([]string, 0, len(b))
	for _, c := range b[1:] {
		parts = append(parts, fuzzLabels[int(c)%n])
	}
	parts = append(parts, fuzzTails[int(b[0])%len(fuzzTails)])
	return strings.Join(parts, ".")
}

type fuzzRule struct {
	pol      int
	index    int
	patterns []Pattern
	ports    []int32
	initOnly bool
}

// bruteDecide is the reference: every rule of every selecting policy in
// order of precedence, each pattern asked with Pattern.Match.
func bruteDecide(rules []fuzzRule, selects func(pol int) bool, host string, port int, initialized bool) (Reason, int, int) {
	matched, initOnly := false, false
	for _, r := range rules {
		if !selects(r.pol) {
			continue
		}
		hit := false
		for _, p := range r.patterns {
			hit = hit || p.Match(host)
		}
		if !hit {
			continue
		}
		portOK := port == 0
		for _, p := range r.ports {
			portOK = portOK || int(p) == port
		}
		switch {
		case !portOK:
			matched = true
		case r.initOnly && initialized:
			initOnly = true
		default:
			return ReasonAllowed, r.pol, r.index
		}
	}
	switch {
	case initOnly:
		return ReasonInitOnly, -1, -1
	case matched:
		return ReasonPortNotAllowed, -1, -1
	}
	return ReasonNotAllowlisted, -1, -1
}

// FuzzDecide checks the label index against a brute-force scan: for
// random patterns (generated from a small alphabet, plus one raw pattern)
// and hosts, Decide's reason, policy and rule are those of the first rule,
// in order of precedence, whose pattern matches by Pattern.Match; and
// Explain names that rule.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 4, 0xff, 1, 5, 0xff, 0, 0, 1}, []byte{0, 0, 1}, "", "", uint8(0))
	f.Add([]byte{0, 5, 0xff, 0, 4, 1, 0xff, 2, 3}, []byte{0, 2, 1}, "**.b.example.com", "", uint8(3))
	f.Add([]byte{1, 4, 4}, []byte{1, 0, 0}, "a.*.example.com", "a.b.example.com", uint8(0x15))
	f.Add([]byte{2}, []byte{2}, "*.example.org", "x.EXAMPLE.org.", uint8(0x2a))
	f.Fuzz(func(t *testing.T, spec, hostSpec []byte, rawPattern, rawHost string, flags uint8) {
		// Rules: spec split at 0xff; each part a pattern. The rule's
		// policy, ports and phase come from its bytes and flags.
		var (
			rules []fuzzRule
			docs  = []Document{
				doc("ns", "p0", metav1.LabelSelector{}, nil),
				doc("ns", "p1", labelSel("app", "llm"), nil),
				doc("ns", "p2", labelSel("app", "other"), nil),
			}
		)
		add := func(pol int, p Pattern, seed int) {
			r := EgressRule{Hosts: []string{p.String()}, Ports: []int32{443}}
			if seed&1 != 0 {
				r.Ports = append(r.Ports, 8443)
			}
			if seed&2 != 0 {
				r.Ports = []int32{80}
			}
			if seed&4 != 0 {
				r.Phase = PhaseInit
			}
			d := &docs[pol].Policy.Spec
			rules = append(rules, fuzzRule{pol: pol, index: len(d.Egress), patterns: []Pattern{p}, ports: r.Ports, initOnly: r.Phase == PhaseInit})
			d.Egress = append(d.Egress, r)
		}
		for i, part := range splitBytes(spec, 0xff) {
			if i >= 12 || len(part) > 8 {
				break
			}
			p, err := ParsePattern(fuzzName(part, true))
			if err != nil {
				continue
			}
			seed := int(part[0]) + i + int(flags)
			add(seed%3, p, seed/3)
		}
		if p, err := ParsePattern(rawPattern); err == nil {
			add(int(flags)%3, p, int(flags)/3)
		}
		var use []Document
		for _, d := range docs {
			if len(d.Policy.Spec.Egress) > 0 {
				use = append(use, d)
			}
		}
		s, err := Compile(use)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		// Rules in order of precedence: policies by name (p0, p1, p2 are
		// already sorted), then index.
		ordered := make([]fuzzRule, 0, len(rules))
		for pol := range docs {
			for _, r := range rules {
				if r.pol == pol {
					ordered = append(ordered, r)
				}
			}
		}

		host := fuzzName(hostSpec, false)
		if rawHost != "" {
			host = rawHost
		}
		if len(hostSpec) > 10 || host == "" {
			return
		}
		host, err = NormalizeHost(host)
		if err != nil || looksLikeIP(host) {
			return
		}
		c := testClient("ns", map[string]string{"app": "llm"})
		if flags&0x40 != 0 {
			c.Labels["app"] = "other"
		}
		c.Initialized = flags&0x80 != 0
		port := [...]int{0, 80, 443, 8443}[int(flags>>4)%4]

		selects := func(pol int) bool {
			switch pol {
			case 1:
				return c.Labels["app"] == "llm"
			case 2:
				return c.Labels["app"] == "other"
			}
			return true
		}
		reason, pol, index := bruteDecide(ordered, selects, host, port, c.Initialized)
		args := DecideArgs{Client: c, Host: host, Port: port}
		d := s.Decide(args)
		checkExplainAgrees(t, s, args)
		wantPolicy := ""
		if pol >= 0 {
			wantPolicy = "ns/" + docs[pol].Policy.Name
		}
		if d.Reason != reason || d.Policy != wantPolicy || d.Rule != index || d.Allowed() != (reason == ReasonAllowed) {
			t.Fatalf("host %q port %d initialized %v: Decide = %+v; brute force: %s %q rule %d\nrules: %+v",
				host, port, c.Initialized, d, reason, wantPolicy, index, ordered)
		}
	})
}

func splitBytes(b []byte, sep byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != sep {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
