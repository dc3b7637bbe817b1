package policy

import (
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLint(t *testing.T) {
	app := metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}
	withCIDR := func(r EgressRule, c ...string) EgressRule { r.CIDRs = c; return r }
	withPhase := func(r EgressRule, p string) EgressRule { r.Phase = p; return r }
	withECH := func(r EgressRule) EgressRule { r.ECH = ECHAllow; return r }
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
			[]string{`spec.egress[0].hosts[0] "*.s3.amazonaws.com": covers tenants of the privately registered public suffix "s3.amazonaws.com": any tenant`}},
		{"azure blob private suffix", doc("ns", "p", app, nil, rule([]int32{443}, "ok.example.com", "**.blob.core.windows.net")), nil,
			[]string{`hosts[1] "**.blob.core.windows.net"`}},
		{"github.io", doc("ns", "p", app, nil, rule([]int32{443}, "*.github.io")), nil, []string{`"github.io"`}},
		{"wildcard PSL rule compute", doc("ns", "p", app, nil, rule([]int32{443}, "*.compute.amazonaws.com")), nil,
			[]string{`"*.compute.amazonaws.com"`}},
		{"exact under private suffix is fine", doc("ns", "p", app, nil, rule([]int32{443}, "mybucket.s3.amazonaws.com")), nil, nil},
		{"registrable under private suffix is fine", doc("ns", "p", app, nil, rule([]int32{443}, "*.mybucket.s3.amazonaws.com")), nil, nil},
		{"unlisted tld is fine", doc("ns", "p", app, nil, rule([]int32{443}, "*.corp.internal")), nil, nil},
		// Private suffixes below the pattern's fixed part (issue 10).
		{"globstar over amazonaws.com", doc("ns", "p", app, nil, rule([]int32{443}, "**.amazonaws.com")), nil,
			[]string{`"**.amazonaws.com": covers tenants of the privately registered public suffix "s3.amazonaws.com" (and `,
				`matches the container registry host "*.dkr.ecr.*.amazonaws.com"`}},
		{"globstar over windows.net", doc("ns", "p", app, nil, rule([]int32{443}, "**.windows.net")), nil,
			[]string{`"**.windows.net": covers tenants of the privately registered public suffix "servicebus.windows.net" (and 3 more)`}},
		{"globstar over core.windows.net", doc("ns", "p", app, nil, rule([]int32{443}, "**.core.windows.net")), nil,
			[]string{`"**.core.windows.net": covers tenants of the privately registered public suffix "web.core.windows.net" (and 2 more)`}},
		{"star in the middle spans buckets", doc("ns", "p", app, nil, rule([]int32{443}, "assets.*.amazonaws.com")), nil,
			[]string{`"assets.*.amazonaws.com": covers tenants of the privately registered public suffix "s3.amazonaws.com" (and `}},
		{"star over amazonaws.com names the suffixes, no tenant", doc("ns", "p", app, nil, rule([]int32{443}, "*.amazonaws.com")), nil, nil},
		{"wildcard inside one tenant is fine", doc("ns", "p", app, nil, rule([]int32{443}, "**.mybucket.s3.amazonaws.com")), nil, nil},
		{"wildcard under a registrable domain without private suffixes", doc("ns", "p", app, nil, rule([]int32{443}, "**.example.com")), nil, nil},
		// Container registries (issue 10).
		{"docker hub", doc("ns", "p", app, nil, rule([]int32{443}, "registry-1.docker.io", "auth.docker.io")), nil,
			[]string{`hosts[0] "registry-1.docker.io": matches the container registry host "*.docker.io": image pulls are the kubelet's traffic`,
				`hosts[1] "auth.docker.io": matches the container registry host "*.docker.io"`}},
		{"docker hub blobs", doc("ns", "p", app, nil, rule([]int32{443}, "production.cloudflare.docker.com")), nil,
			[]string{`"production.cloudflare.docker.com"`}},
		{"ghcr and its blobs", doc("ns", "p", app, nil, rule([]int32{443}, "ghcr.io", "pkg-containers.githubusercontent.com")), nil,
			[]string{`"ghcr.io"`, `"pkg-containers.githubusercontent.com"`}},
		{"artifact registry", doc("ns", "p", app, nil, rule([]int32{443}, "us-docker.pkg.dev")), nil, []string{`"*.pkg.dev"`}},
		{"gcr", doc("ns", "p", app, nil, rule([]int32{443}, "gcr.io", "eu.gcr.io")), nil, []string{`"gcr.io"`, `"*.gcr.io"`}},
		{"ecr", doc("ns", "p", app, nil, rule([]int32{443}, "123456789012.dkr.ecr.eu-west-1.amazonaws.com")), nil,
			[]string{`"*.dkr.ecr.*.amazonaws.com"`}},
		{"acr", doc("ns", "p", app, nil, rule([]int32{443}, "corp.azurecr.io")), nil, []string{`"*.azurecr.io"`}},
		{"mcr and its data hosts", doc("ns", "p", app, nil, rule([]int32{443}, "mcr.microsoft.com", "westeurope.data.mcr.microsoft.com")), nil,
			[]string{`"mcr.microsoft.com"`, `"*.data.mcr.microsoft.com"`}},
		{"quay cdn", doc("ns", "p", app, nil, rule([]int32{443}, "quay.io", "cdn02.quay.io")), nil,
			[]string{`"quay.io"`, `"cdn02.quay.io"`}},
		{"wildcard over a registry", doc("ns", "p", app, nil, rule([]int32{443}, "*.quay.io")), nil, []string{`"cdn.quay.io"`}},
		{"not a registry", doc("ns", "p", app, nil, rule([]int32{443}, "api.github.com", "docs.docker.com", "quay.example.com")), nil, nil},
		// Wide address rules (issue 10).
		{"address rule /8", doc("ns", "p", app, nil, withCIDR(EgressRule{Ports: []int32{443}}, "10.0.0.0/8")), nil,
			[]string{`cidrs[0] "10.0.0.0/8": a wide address rule (2^24 addresses): each is reachable by IP literal on ports [443]`}},
		{"address rule everything", doc("ns", "p", app, nil, withCIDR(EgressRule{Ports: []int32{443}}, "0.0.0.0/0", "::/0")), nil,
			[]string{`cidrs[0] "0.0.0.0/0": a wide address rule (2^32 addresses)`, `cidrs[1] "::/0": a wide address rule (2^128 addresses)`}},
		{"address rule ipv6 /32", doc("ns", "p", app, nil, withCIDR(EgressRule{Ports: []int32{443}}, "2001:db8::/32")), nil,
			[]string{`"2001:db8::/32": a wide address rule`}},
		{"address rules /16 and /48 are fine", doc("ns", "p", app, nil, withCIDR(EgressRule{Ports: []int32{443}}, "10.40.0.0/16", "fd00:1::/48")), nil, nil},
		{"cidrs beside hosts are not address rules", doc("ns", "p", app, nil, withCIDR(rule([]int32{443}, "a.example.com"), "10.0.0.0/8")), nil, nil},
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
		// Deleting rule 0 would open 10.0.0.0/8 to a.example.com: the
		// deciding rule's cidrs are what the guard opens.
		{"cidrs inside broader cidrs", doc("ns", "p", app, nil,
			withCIDR(rule([]int32{443}, "a.example.com"), "10.1.0.0/16"),
			withCIDR(rule([]int32{443}, "**.example.com"), "10.0.0.0/8"),
		), nil, nil},
		{"same cidrs, broader later", doc("ns", "p", app, nil,
			withCIDR(rule([]int32{443}, "a.example.com"), "10.0.0.0/8"),
			withCIDR(rule([]int32{443}, "**.example.com"), "10.0.0.0/8"),
		), nil, []string{"spec.egress[0] is shadowed"}},
		{"init rule beside an exact one is not shadowed", doc("ns", "p", app, nil,
			withPhase(rule([]int32{443}, "**.example.com"), PhaseInit),
			rule([]int32{443}, "a.example.com"),
		), nil, nil},
		{"exact init rule after a broad one is shadowed", doc("ns", "p", app, nil,
			rule([]int32{443}, "**.example.com"),
			withPhase(rule([]int32{443}, "a.example.com"), PhaseInit),
		), nil, []string{"spec.egress[1] is shadowed by the broader spec.egress[0], which comes first"}},
		{"ech differs: not shadowed", doc("ns", "p", app, nil,
			withECH(rule([]int32{443}, "a.example.com")),
			rule([]int32{443}, "**.example.com"),
		), nil, nil},
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

func TestSpansTenants(t *testing.T) {
	tests := []struct {
		pattern, suffix string
		want            bool
	}{
		{"*.s3.amazonaws.com", "s3.amazonaws.com", true},
		{"**.s3.amazonaws.com", "s3.amazonaws.com", true},
		{"**.amazonaws.com", "s3.amazonaws.com", true},
		{"**.amazonaws.com", "compute.amazonaws.com", true},
		{"x.*.amazonaws.com", "s3.amazonaws.com", true},
		{"*.*.amazonaws.com", "s3.amazonaws.com", true},
		{"*.amazonaws.com", "s3.amazonaws.com", false},
		{"*.mybucket.s3.amazonaws.com", "s3.amazonaws.com", false},
		{"a.*.mybucket.s3.amazonaws.com", "s3.amazonaws.com", false},
		{"**.s3.amazonaws.com", "blob.core.windows.net", false},
		{"*.example.com", "s3.amazonaws.com", false},
		{"**.windows.net", "blob.core.windows.net", true},
		{"*.windows.net", "blob.core.windows.net", false},
		{"*.*.windows.net", "blob.core.windows.net", false},
		{"*.*.*.windows.net", "blob.core.windows.net", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.suffix, func(t *testing.T) {
			p, err := ParsePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := spansTenants(p.labels, tt.suffix); got != tt.want {
				t.Fatalf("spansTenants = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPatternsIntersect(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"ghcr.io", "ghcr.io", true},
		{"ghcr.io", "gcr.io", false},
		{"*.gcr.io", "eu.gcr.io", true},
		{"*.gcr.io", "gcr.io", false},
		{"**.docker.io", "*.docker.io", true},
		{"**.docker.io", "docker.io", false},
		{"**.io", "docker.io", true},
		{"*.dkr.ecr.*.amazonaws.com", "1.dkr.ecr.us-east-1.amazonaws.com", true},
		{"*.dkr.ecr.*.amazonaws.com", "*.amazonaws.com", false},
		{"*.dkr.ecr.*.amazonaws.com", "**.amazonaws.com", true},
		{"*.dkr.ecr.*.amazonaws.com", "x.dkr.ecr.*.amazonaws.com.cn", false},
		{"**.a.example.com", "**.b.example.com", false},
		{"**.example.com", "**.b.example.com", true},
		{"a.*.example.com", "*.b.example.com", true},
	}
	for _, tt := range tests {
		t.Run(tt.a+" "+tt.b, func(t *testing.T) {
			a, b := strings.Split(tt.a, "."), strings.Split(tt.b, ".")
			if got := patternsIntersect(a, b); got != tt.want {
				t.Fatalf("patternsIntersect = %v, want %v", got, tt.want)
			}
			if got := patternsIntersect(b, a); got != tt.want {
				t.Fatalf("patternsIntersect reversed = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRegistryHostsParse: every registry entry is a pattern ParsePattern
// accepts, so that it means what a rule with that host would.
func TestRegistryHostsParse(t *testing.T) {
	for _, r := range registryHosts {
		p, err := ParsePattern(r)
		if err != nil || p.String() != r {
			t.Errorf("%q: %v (%q)", r, err, p)
		}
	}
}

// TestPrivateSuffixesCurrent holds private_suffixes.go to the linked
// golang.org/x/net: the version in go.mod, and every entry still a
// private rule of its publicsuffix.
func TestPrivateSuffixesCurrent(t *testing.T) {
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "golang.org/x/net" {
			want = f[1]
		}
	}
	if want != pslVersion {
		t.Fatalf("private_suffixes.go is from golang.org/x/net %s, go.mod has %q: run go generate ./policy/", pslVersion, want)
	}
	if len(privateSuffixes) < 100 {
		t.Fatalf("%d private suffixes", len(privateSuffixes))
	}
	for _, r := range privateSuffixes {
		if !isPrivateRule(r) {
			t.Errorf("%q is not a private rule of the linked publicsuffix", r)
		}
	}
	for _, r := range []string{"s3.amazonaws.com", "*.compute.amazonaws.com", "blob.core.windows.net"} {
		if _, ok := slices.BinarySearch(privateSuffixes[:], r); !ok {
			t.Errorf("%q missing", r)
		}
	}
}
