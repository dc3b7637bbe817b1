package chart

import (
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/egressd/egressd/policy"
)

// neverPatterns are the schema's spellings of the addresses inside each
// never-class range of the guard (policy.NeverPrefixes), IPv6 in any case.
// A range the guard gains fails TestSchemaNeverClass until it has one here
// and in the schema.
var neverPatterns = map[string]string{
	"169.254.0.0/16":         `^169\.254\.[0-9]{1,3}\.[0-9]{1,3}(/[0-9]{1,2})?$`,
	"168.63.129.16/32":       `^168\.63\.129\.16(/32)?$`,
	"100.100.100.200/32":     `^100\.100\.100\.200(/32)?$`,
	"fe80::/10":              `^[fF][eE][89aAbB][0-9a-fA-F]:[0-9a-fA-F:]*(/[0-9]{1,3})?$`,
	"fd00:ec2::254/128":      `^[fF][dD]00:[eE][cC]2::254(/128)?$`,
	"fd00:ec2::23/128":       `^[fF][dD]00:[eE][cC]2::23(/128)?$`,
	"fd20:ce::254/128":       `^[fF][dD]20:[cC][eE]::254(/128)?$`,
	"64:ff9b::a9fe:0/112":    `^64:[fF][fF]9[bB]::[aA]9[fF][eE]:[0-9a-fA-F]{1,4}(/1[12][0-9])?$`,
	"64:ff9b::a83f:8110/128": `^64:[fF][fF]9[bB]::[aA]83[fF]:8110(/128)?$`,
	"64:ff9b::6464:64c8/128": `^64:[fF][fF]9[bB]::6464:64[cC]8(/128)?$`,
	"2002:a9fe::/32":         `^2002:[aA]9[fF][eE]:[0-9a-fA-F:]*(/[0-9]{1,3})?$`,
	"2002:a83f:8110::/48":    `^2002:[aA]83[fF]:8110:[0-9a-fA-F:]*(/[0-9]{1,3})?$`,
	"2002:6464:64c8::/48":    `^2002:6464:64[cC]8:[0-9a-fA-F:]*(/[0-9]{1,3})?$`,
}

// TestSchemaNeverClass holds the values schema's neverClass (which
// inject.noProxy, cluster.serviceCIDR and inject.apiServerAddress may not
// match) to the guard's list, the one source (issue 25): an enum of every
// range that holds a never-class range, in netip's spelling, and one
// pattern per range for the addresses inside it.
func TestSchemaNeverClass(t *testing.T) {
	b, err := os.ReadFile("../../charts/egressd/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Definitions struct {
			NeverClass struct {
				AnyOf []struct {
					Enum    []string `json:"enum"`
					Pattern string   `json:"pattern"`
				} `json:"anyOf"`
			} `json:"neverClass"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var enum, patterns []string
	for _, n := range policy.NeverPrefixes() {
		for k := range n.Bits() {
			if s := netip.PrefixFrom(n.Addr(), k).Masked().String(); !slices.Contains(enum, s) {
				enum = append(enum, s)
			}
		}
		p, ok := neverPatterns[n.String()]
		if !ok {
			t.Fatalf("the guard's %s has no schema pattern: add it to neverPatterns and the schema's neverClass", n)
		}
		re := regexp.MustCompile(p)
		first := n.Addr().String()
		if !re.MatchString(first) || !re.MatchString(n.String()) {
			t.Errorf("pattern %s does not match %s or %s", p, first, n)
		}
		patterns = append(patterns, p)
	}
	alts := schema.Definitions.NeverClass.AnyOf
	if len(alts) != 1+len(patterns) {
		t.Fatalf("neverClass has %d alternatives; want the enum and %d patterns", len(alts), len(patterns))
	}
	if !slices.Equal(alts[0].Enum, enum) {
		t.Errorf("neverClass enum differs from the ranges that hold the guard's never class:\n got %v\nwant %v", alts[0].Enum, enum)
	}
	for i, p := range patterns {
		if alts[1+i].Pattern != p {
			t.Errorf("neverClass pattern %d = %q; want %q", i, alts[1+i].Pattern, p)
		}
	}
}
