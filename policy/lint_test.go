package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLint(t *testing.T) {
	app := metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}
	withCIDR := func(r EgressRule, c ...string) EgressRule { r.CIDRs = c; return r }
	tests := []struct {
		name string
		doc  Document
		pods []*Client
		want []string // substrings, one warning each, in order
	}{
		{"clean", doc("ns", "p", app, nil,
			rule([]int32{443}, "models.example.com"),
			rule([]int32{443}, "**.blob.example.net"),
		), nil, nil},
		{"s3 private suffix", doc("ns", "p", app, nil, rule([]int32{443}, "*.s3.amazonaws.com")), nil,
			[]string{`spec.egress[0].hosts[0] "*.s3.amazonaws.com": under the privately registered public suffix "s3.amazonaws.com": any tenant`}},
		{"azure blob private suffix", doc("ns", "p", app, nil, rule([]int32{443}, "ok.example.com", "**.blob.core.windows.net")), nil,
			[]string{`hosts[1] "**.blob.core.windows.net"`}},
		{"github.io", doc("ns", "p", app, nil, rule([]int32{443}, "*.github.io")), nil, []string{`"github.io"`}},
		{"wildcard PSL rule compute", doc("ns", "p", app, nil, rule([]int32{443}, "*.compute.amazonaws.com")), nil,
			[]string{`"*.compute.amazonaws.com"`}},
		{"exact under private suffix is fine", doc("ns", "p", app, nil, rule([]int32{443}, "mybucket.s3.amazonaws.com")), nil, nil},
		{"registrable under private suffix is fine", doc("ns", "p", app, nil, rule([]int32{443}, "*.mybucket.s3.amazonaws.com")), nil, nil},
		{"unlisted tld is fine", doc("ns", "p", app, nil, rule([]int32{443}, "*.corp.internal")), nil, nil},
		{"duplicate rule", doc("ns", "p", app, nil,
			rule([]int32{443}, "a.example.com"),
			rule([]int32{443}, "a.example.com"),
		), nil, []string{"spec.egress[1] duplicates spec.egress[0]"}},
		{"shadowed by wildcard", doc("ns", "p", app, nil,
			rule([]int32{443}, "a.example.com"),
			rule([]int32{443, 80}, "*.example.com"),
		), nil, []string{"spec.egress[0] is shadowed by the broader spec.egress[1]"}},
		{"other port is not shadowed", doc("ns", "p", app, nil,
			rule([]int32{8443}, "a.example.com"),
			rule([]int32{443}, "*.example.com"),
		), nil, nil},
		{"cidrs are not shadowed", doc("ns", "p", app, nil,
			withCIDR(rule([]int32{443}, "a.example.com"), "10.0.0.0/8"),
			rule([]int32{443}, "*.example.com"),
		), nil, nil},
		{"cidrs inside broader cidrs", doc("ns", "p", app, nil,
			withCIDR(rule([]int32{443}, "a.example.com"), "10.1.0.0/16"),
			withCIDR(rule([]int32{443}, "**.example.com"), "10.0.0.0/8"),
		), nil, []string{"spec.egress[0] is shadowed"}},
		{"host covered in rule", doc("ns", "p", app, nil,
			rule([]int32{443}, "a.b.example.com", "**.example.com", "**.example.com"),
		), nil, []string{`"a.b.example.com" is already matched by "**.example.com"`, `"**.example.com" is already matched by "**.example.com"`}},
		{"cidr everything", doc("ns", "p", app, nil, withCIDR(rule([]int32{443}, "a.example.com"), "0.0.0.0/0")), nil,
			[]string{`cidrs[0] "0.0.0.0/0": opens every private address`}},
		{"selects no pod", doc("ns", "p", app, nil, rule([]int32{443}, "a.example.com")),
			[]*Client{testClient("ns", map[string]string{"app": "web"}), testClient("other", map[string]string{"app": "llm"})},
			[]string{"selects none of the 2 given pods"}},
		{"selects a pod", doc("ns", "p", app, nil, rule([]int32{443}, "a.example.com")),
			[]*Client{testClient("ns", map[string]string{"app": "llm"})}, nil},
		{"SA excludes every pod", doc("ns", "p", app, []string{"llm"}, rule([]int32{443}, "a.example.com")),
			[]*Client{testClient("ns", map[string]string{"app": "llm"})}, []string{"selects none"}},
		{"empty pod list", doc("ns", "p", app, nil, rule([]int32{443}, "a.example.com")),
			[]*Client{}, []string{"selects none of the 0 given pods"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := Lint([]Document{tt.doc}, tt.pods)
			if len(ws) != len(tt.want) {
				t.Fatalf("got %d warnings %v, want %d %q", len(ws), ws, len(tt.want), tt.want)
			}
			for i, w := range ws {
				if w.Origin != tt.doc.Origin || !strings.Contains(w.Message, tt.want[i]) {
					t.Fatalf("warning %d = %s; want %q", i, w, tt.want[i])
				}
			}
		})
	}
}
