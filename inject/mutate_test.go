package inject

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testProxy = "http://egressd.llm-prod.svc:3128"

func testConfig() Config {
	return Config{
		ProxyURL:      testProxy,
		ClusterDomain: "cluster.local",
		APIServer:     []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		ServiceCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
		NoProxy:       []string{".internal.cluster.local"},
		Version:       "v1.2.3",
		Never:         testNever,
	}
}

// testNever is policy.NeverPrefixes as this package's tests see it (the
// package imports no policy; cmd/egressd's TestInjectNoProxyNever holds
// the wiring of the real list).
var testNever = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("168.63.129.16/32"),
	netip.MustParsePrefix("100.100.100.200/32"), netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("fd00:ec2::23/128"),
	netip.MustParsePrefix("fd20:ce::254/128"),
}

const wantNoProxy = "localhost,127.0.0.1,::1,.svc,.svc.cluster.local,.cluster.local,10.96.0.1,10.96.0.0/16,.internal.cluster.local"

// apply runs Mutate and applies its patch with the JSON patch code the API
// server uses, returning the admitted pod.
func apply(t *testing.T, pod *corev1.Pod, cfg Config) (*corev1.Pod, Result) {
	t.Helper()
	res, err := Mutate(pod, "llm-prod", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Patch == nil {
		return pod.DeepCopy(), res
	}
	return applyPatch(t, pod, res.Patch), res
}

func applyPatch(t testing.TB, pod *corev1.Pod, patch []byte) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("decode patch %s: %v", patch, err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch %s: %v", patch, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func injected() map[string]string {
	return map[string]string{
		"HTTPS_PROXY": testProxy, "https_proxy": testProxy, "HTTP_PROXY": testProxy, "http_proxy": testProxy,
		"NO_PROXY": wantNoProxy, "no_proxy": wantNoProxy,
	}
}

func values(c corev1.Container) map[string]string {
	m := map[string]string{}
	for n, e := range env(c) {
		if strings.Contains(strings.ToLower(n), "proxy") {
			m[n] = e.Value
			if e.ValueFrom != nil {
				m[n] = "valueFrom"
			}
		}
	}
	return m
}

func pod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "llm-prod"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app"}},
			DNSPolicy:  corev1.DNSClusterFirst,
		},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

func TestMutateEnv(t *testing.T) {
	secretRef := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "proxy"}, Key: "url"}}
	cases := []struct {
		name    string
		pod     *corev1.Pod
		want    []map[string]string // per container, init containers first
		skipped string
	}{
		{name: "direct pod", pod: pod(nil), want: []map[string]string{injected()}},
		{name: "init containers", pod: pod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "fetch"}, {Name: "unpack", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar"})
		}), want: []map[string]string{injected(), injected(), injected(), injected()}},
		{name: "env already set keeps the pair", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "https_proxy", Value: "http://other:8080"}, {Name: "NO_PROXY", Value: "corp.example"}}
		}), want: []map[string]string{{"https_proxy": "http://other:8080", "NO_PROXY": "corp.example",
			"HTTP_PROXY": testProxy, "http_proxy": testProxy}}},
		{name: "override replaces", pod: pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationOverride: "true"}
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "https_proxy", Value: "http://other:8080"}, {Name: "NO_PROXY", Value: "*"}}
		}), want: []map[string]string{injected()}},
		{name: "env from valueFrom is kept", pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", ValueFrom: secretRef}}
		}), want: []map[string]string{{"HTTPS_PROXY": "valueFrom", "HTTP_PROXY": testProxy, "http_proxy": testProxy,
			"NO_PROXY": wantNoProxy, "no_proxy": wantNoProxy}}},
		{name: "env from valueFrom with override", pod: pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationOverride: "true"}
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", ValueFrom: secretRef}}
		}), want: []map[string]string{injected()}},
		{name: "opt-out annotation", pod: pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationInject: "false"}
		}), want: []map[string]string{{}}, skipped: SkipOptedOut},
		{name: "opt-out label", pod: pod(func(p *corev1.Pod) {
			p.Labels = map[string]string{AnnotationInject: "False"}
		}), want: []map[string]string{{}}, skipped: SkipOptedOut},
		{name: "inject true is injected", pod: pod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationInject: "true"}
		}), want: []map[string]string{injected()}},
		{name: "host network pod is skipped", pod: pod(func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
		}), want: []map[string]string{{}}, skipped: SkipHostNetwork},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, res := apply(t, tc.pod, testConfig())
			if res.Skipped != tc.skipped {
				t.Fatalf("Skipped = %q, want %q", res.Skipped, tc.skipped)
			}
			all := append(append([]corev1.Container(nil), got.Spec.InitContainers...), got.Spec.Containers...)
			if len(all) != len(tc.want) {
				t.Fatalf("%d containers, want %d", len(all), len(tc.want))
			}
			for i, c := range all {
				if g := values(c); !reflect.DeepEqual(g, tc.want[i]) {
					t.Errorf("container %s: proxy env %v, want %v", c.Name, g, tc.want[i])
				}
			}
			mark := got.Annotations[AnnotationInjected]
			if tc.skipped == "" && mark != "v1.2.3" || tc.skipped != "" && mark != "" {
				t.Errorf("%s = %q", AnnotationInjected, mark)
			}
			// Other env entries stay where they were.
			if len(tc.pod.Spec.InitContainers) > 1 && got.Spec.InitContainers[1].Env[0].Name != "A" {
				t.Errorf("unpack's own env moved: %v", got.Spec.InitContainers[1].Env)
			}
			// Re-invocation: the admitted pod, admitted again, is unchanged.
			again, res2 := apply(t, got, testConfig())
			if res2.Patch != nil {
				t.Errorf("second admission patches: %s", res2.Patch)
			}
			if !reflect.DeepEqual(again, got) {
				t.Errorf("second admission changed the pod")
			}
		})
	}
}

// TestReinvocationAddsToNewContainers: a container that a later webhook
// added gets the env when the API server invokes egressd again, and the
// containers injected the first time are not touched.
func TestReinvocationAddsToNewContainers(t *testing.T) {
	first, _ := apply(t, pod(nil), testConfig())
	first.Spec.Containers = append(first.Spec.Containers, corev1.Container{Name: "late-sidecar"})
	res, err := Mutate(first, "llm-prod", testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var ops []op
	if err := json.Unmarshal(res.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if !strings.HasPrefix(o.Path, "/spec/containers/1/") && o.Path != "/spec/containers/1/env" {
			t.Errorf("re-invocation touches %s", o.Path)
		}
	}
	second := applyPatch(t, first, res.Patch)
	if g := values(second.Spec.Containers[1]); !reflect.DeepEqual(g, injected()) {
		t.Errorf("late sidecar env %v", g)
	}
}

// TestMark: the mark joins annotations the pod has, and lands on a pod
// whose annotations are an empty map (FuzzMutate found the member path
// patched into a JSON that, omitting the empty map, lacked it).
func TestMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want map[string]string
	}{
		{"existing annotations", map[string]string{"team": "ml"}, map[string]string{"team": "ml", AnnotationInjected: "v1.2.3"}},
		{"empty map", map[string]string{}, map[string]string{AnnotationInjected: "v1.2.3"}},
		{"no map", nil, map[string]string{AnnotationInjected: "v1.2.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := apply(t, pod(func(p *corev1.Pod) { p.Annotations = tc.ann }), testConfig())
			if !reflect.DeepEqual(got.Annotations, tc.want) {
				t.Errorf("annotations %v, want %v", got.Annotations, tc.want)
			}
		})
	}
	// As the API server may send it: {} present in the raw object.
	raw := []byte(`{"metadata":{"annotations":{}},"spec":{"containers":[{"name":"a"}]}}`)
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	res, err := Mutate(&p, "llm-prod", testConfig())
	if err != nil {
		t.Fatal(err)
	}
	jp, _ := jsonpatch.DecodePatch(res.Patch)
	if _, err := jp.Apply(raw); err != nil {
		t.Fatalf("patch does not apply to the raw object: %v", err)
	}
}

func TestMutateDNS(t *testing.T) {
	five, two := "5", "2"
	usual := []string{"llm-prod.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		wantPolicy corev1.DNSPolicy
		want       *corev1.PodDNSConfig
	}{
		{name: "cluster first", pod: pod(nil), wantPolicy: corev1.DNSNone, want: &corev1.PodDNSConfig{
			Nameservers: []string{"10.96.0.53"}, Searches: usual,
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &five}}}},
		{name: "unset policy", pod: pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = "" }), wantPolicy: corev1.DNSNone, want: &corev1.PodDNSConfig{
			Nameservers: []string{"10.96.0.53"}, Searches: usual,
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &five}}}},
		{name: "own searches and options merged", pod: pod(func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"corp.internal", "svc.cluster.local"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}}
		}), wantPolicy: corev1.DNSNone, want: &corev1.PodDNSConfig{
			Nameservers: []string{"10.96.0.53"}, Searches: append(append([]string(nil), usual...), "corp.internal"),
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}}},
		{name: "own nameservers kept", pod: pod(func(p *corev1.Pod) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
		}), wantPolicy: corev1.DNSClusterFirst, want: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}},
		{name: "policy Default kept", pod: pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }),
			wantPolicy: corev1.DNSDefault},
		{name: "opted out", pod: pod(func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationInject: "false"} }),
			wantPolicy: corev1.DNSClusterFirst},
	}
	cfg := testConfig()
	cfg.DNS = netip.MustParseAddr("10.96.0.53")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := apply(t, tc.pod, cfg)
			if got.Spec.DNSPolicy != tc.wantPolicy {
				t.Errorf("dnsPolicy %q, want %q", got.Spec.DNSPolicy, tc.wantPolicy)
			}
			if !reflect.DeepEqual(got.Spec.DNSConfig, tc.want) {
				t.Errorf("dnsConfig %+v, want %+v", got.Spec.DNSConfig, tc.want)
			}
			if res, _ := Mutate(got, "llm-prod", cfg); res.Patch != nil {
				t.Errorf("second admission patches: %s", res.Patch)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		mod     func(*Config)
		wantErr error
	}{
		{"defaults", func(*Config) {}, nil},
		{"no proxy URL", func(c *Config) { c.ProxyURL = "" }, ErrBadConfig},
		{"https proxy URL", func(c *Config) { c.ProxyURL = "https://egressd:3128" }, ErrBadConfig},
		{"proxy URL with user", func(c *Config) { c.ProxyURL = "http://u:p@egressd:3128" }, ErrBadConfig},
		{"zero cluster domain is cluster.local", func(c *Config) { c.ClusterDomain = "" }, nil},
		{"cluster domain trailing dot", func(c *Config) { c.ClusterDomain = "cluster.local." }, nil},
		{"cluster domain subdomain of registrable", func(c *Config) { c.ClusterDomain = "k8s.example.com"; c.NoProxy = nil }, nil},
		{"cluster domain single label", func(c *Config) { c.ClusterDomain = "local" }, ErrBadConfig},
		{"cluster domain public suffix", func(c *Config) { c.ClusterDomain = "co.uk" }, ErrBadConfig},
		{"cluster domain registrable", func(c *Config) { c.ClusterDomain = "example.com"; c.NoProxy = nil }, ErrBadConfig},
		{"public service CIDR", func(c *Config) { c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("8.8.0.0/16")} }, ErrBadConfig},
		{"no never list", func(c *Config) { c.Never = nil }, ErrBadConfig},
		{"service CIDR holds Alibaba metadata", func(c *Config) { c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")} }, ErrBadConfig},
		{"service CIDR inside the CGNAT block, clear of metadata", func(c *Config) { c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")} }, nil},
		{"API server a metadata address", func(c *Config) { c.APIServer = []netip.Addr{netip.MustParseAddr("169.254.169.254")} }, ErrBadConfig},
		{"DNS a link-local address", func(c *Config) { c.DNS = netip.MustParseAddr("169.254.169.253") }, ErrBadConfig},
		{"DNS a Service address", func(c *Config) { c.DNS = netip.MustParseAddr("10.96.0.53") }, nil},
		{"proxy URL a metadata address", func(c *Config) { c.ProxyURL = "http://[fd00:ec2::254]:3128" }, ErrBadConfig},
		{"no proxy Alibaba metadata", func(c *Config) { c.NoProxy = []string{"100.100.100.200"} }, ErrBadNoProxy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errorsIs(err, tc.wantErr) {
				t.Fatalf("Validate() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestNoProxyEntries(t *testing.T) {
	cases := []struct {
		entry string
		ok    bool
	}{
		{".svc", true},
		{"redis.llm-prod.svc", true},
		{"redis.llm-prod.svc.cluster.local", true},
		{".cluster.local", true},
		{"CLUSTER.LOCAL.", true},
		{"localhost", true},
		{"10.0.0.0/8", true},
		{"10.1.2.3", true},
		{"fd12:3456::/32", true},
		{"[fd00::1]", true},
		{"127.0.0.1", true},
		{"100.64.0.0/12", true},
		// The guard's never class, or a range that holds one of it
		// (issue 25): refused, naming the address.
		{"100.100.100.200", false},
		{"100.64.0.0/10", false},
		{"100.100.0.0/16", false},
		{"fd00:ec2::254", false},
		{"FD00:EC2::254", false},
		{"[fd00:ec2::23]", false},
		{"fd20:ce::254", false},
		{"fd00::/8", false},
		{"fc00::/7", false},
		{"", false},
		{"*", false},
		{".com", false},
		{"com", false},
		{"redis", false},
		{"co.uk", false},
		{".example.com", false},
		{"api.openai.com", false},
		{"cluster.local.evil.com", false},
		{"evilcluster.local", false},
		{"a,b.svc", false},
		{"*.svc", false},
		{"8.8.8.8", false},
		{"0.0.0.0/0", false},
		{"10.0.0.0/7", false},
		{"::/0", false},
		{"169.254.169.254", false},
		{"_srv._tcp.svc", false},
		{"bücher.svc", false},
		{strings.Repeat("a", 64) + ".svc", false},
	}
	for _, tc := range cases {
		t.Run(tc.entry, func(t *testing.T) {
			err := testConfig().checkNoProxy(tc.entry, "cluster.local")
			if (err == nil) != tc.ok {
				t.Fatalf("checkNoProxy(%q) = %v, want ok %v", tc.entry, err, tc.ok)
			}
			if err != nil && !errorsIs(err, ErrBadNoProxy) {
				t.Fatalf("error %v does not wrap ErrBadNoProxy", err)
			}
		})
	}
}

// TestNoProxyNeverNamed: a refused never-class entry's error names the
// metadata address it is or holds, so that a person knows what to remove.
func TestNoProxyNeverNamed(t *testing.T) {
	for entry, want := range map[string]string{
		"100.64.0.0/10":   "covers 100.100.100.200",
		"fc00::/7":        "covers fd00:ec2::254",
		"fd20:ce::254":    "covers fd20:ce::254",
		"::ffff:10.0.0.1": "",
	} {
		err := testConfig().checkNoProxy(entry, "cluster.local")
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v; want accepted", entry, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "never") {
			t.Errorf("%s: %v; want an error that says %q and names the never class", entry, err, want)
		}
	}
}
