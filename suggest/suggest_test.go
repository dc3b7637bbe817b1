package suggest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

var t0 = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)

// rec is an audit record of pod llm-server-7d9f8-abcde of Deployment
// llm-server in llm-prod, started at t0+ms.
func rec(ms int, host string, port int, verdict, reason string) *record.Record {
	start := t0.Add(time.Duration(ms) * time.Millisecond)
	return &record.Record{
		Time: start.Add(100 * time.Millisecond), Start: start, Event: record.EventEnd, ID: audit.NewID(), Kind: record.KindConnect,
		Client: record.Client{IP: "10.244.1.17", Namespace: "llm-prod", Pod: "llm-server-7d9f8-abcde", ServiceAccount: "llm-server",
			Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
		Host: host, Port: port, Verdict: verdict, Reason: reason, WouldDeny: verdict == "allow" && reason != "allowed",
		Peer: "93.184.215.14:" + itoa(port), // public: no cidrs needed
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func with(r *record.Record, f func(r *record.Record)) *record.Record { f(r); return r }

func writeRecords(t *testing.T, recs ...*record.Record) []auditlog.Input {
	t.Helper()
	var buf bytes.Buffer
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ins, err := auditlog.Inputs([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

var ctrl = true

// pods is the pods file: the recorded pod with its ReplicaSet owner and
// the labels a Deployment's pod carries.
var pods = []*corev1.Pod{{
	ObjectMeta: metav1.ObjectMeta{Namespace: "llm-prod", Name: "llm-server-7d9f8-abcde",
		Labels:          map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "inference", "pod-template-hash": "7d9f8"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llm-server-7d9f8", Controller: &ctrl}}},
	Spec: corev1.PodSpec{ServiceAccountName: "llm-server"},
}, {
	ObjectMeta: metav1.ObjectMeta{Namespace: "llm-prod", Name: "llm-server-7d9f8-zzzzz",
		Labels:          map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "inference", "pod-template-hash": "7d9f8", "canary": "yes"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llm-server-7d9f8", Controller: &ctrl}}},
}}

func TestSuggest(t *testing.T) {
	type want struct {
		rules    []string // "pattern:port purpose [cidrs]"
		labels   map[string]string
		fallback bool
		skipped  []string // keys of Skipped
		leftOut  []string // substrings of LeftOut
		output   []string // substrings of the YAML
	}
	cases := []struct {
		name string
		cfg  Config
		recs []*record.Record
		want want
	}{
		{
			name: "audit mode: a download and its redirect",
			cfg:  Config{Pods: pods},
			recs: []*record.Record{
				rec(0, "models.example.com", 443, "allow", "not-allowlisted"),
				rec(300, "eu1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(60000, "api.llm.example", 443, "allow", "not-allowlisted"),
			},
			want: want{
				rules: []string{"api.llm.example:443 TODO", "eu1.blob.example.net:443 redirect target of models.example.com?",
					"models.example.com:443 TODO"},
				labels: map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "inference"},
				output: []string{`owner: "TODO"`, `serviceAccountNames: ["llm-server"]`, `name: "llm-server-suggested"`},
			},
		},
		{
			name: "a host first seen 6 s after is no redirect target; a denied request is no source",
			recs: []*record.Record{
				rec(0, "models.example.com", 443, "allow", "allowed"),
				rec(6000, "eu1.blob.example.net", 443, "deny", "not-allowlisted"),
				rec(4000, "cdn.example.org", 443, "deny", "port-not-allowed"),
				rec(14000, "cdn.example.org", 443, "deny", "not-allowlisted"),
			},
			want: want{
				rules:    []string{"cdn.example.org:443 redirect target of models.example.com?", "eu1.blob.example.net:443 TODO"},
				labels:   map[string]string{"app.kubernetes.io/name": "llm-server"},
				fallback: true,
				output:   []string{"# podSelector: a guess"},
			},
		},
		{
			name: "plain HTTP names its redirect",
			recs: []*record.Record{
				with(rec(0, "mirror.example.com", 80, "allow", "allowed"), func(r *record.Record) {
					r.Kind, r.HTTP = record.KindHTTP, &record.HTTP{Method: "GET", Status: 302, RedirectHost: "files.example.net"}
				}),
				with(rec(30000, "files.example.net", 80, "allow", "not-allowlisted"), func(r *record.Record) { r.Kind = record.KindHTTP }),
			},
			want: want{rules: []string{"files.example.net:80 redirect target of mirror.example.com"}, fallback: true,
				labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
		{
			// 30 s apart: past the timing window, so only the record of
			// the inspected 302 names the source, exactly.
			name: "an inspected redirect is exact",
			recs: []*record.Record{
				with(rec(0, "models.example.com", 443, "allow", "allowed"), func(r *record.Record) {
					r.Kind, r.Tunnel = record.KindInspected, "tunnel-1"
					r.HTTP = &record.HTTP{Method: "GET", Status: 302, RedirectHost: "eu1.blob.example.net", Proto: "HTTP/2.0"}
				}),
				rec(30000, "eu1.blob.example.net", 443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"eu1.blob.example.net:443 redirect target of models.example.com"}, fallback: true,
				labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
		{
			// "/\\evil.example/x": a path to curl, evil.example to a
			// browser (issue 25): never read as the redirect that
			// explains evil.example.
			name: "an ambiguous redirect names no target",
			recs: []*record.Record{
				with(rec(0, "models.example.com", 443, "allow", "allowed"), func(r *record.Record) {
					r.Kind, r.Tunnel = record.KindInspected, "tunnel-1"
					r.HTTP = &record.HTTP{Method: "GET", Status: 302, RedirectHost: "evil.example", RedirectAmbiguous: true, Proto: "HTTP/2.0"}
				}),
				rec(30000, "evil.example", 443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"evil.example:443 TODO"}, fallback: true,
				labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
		{
			name: "three siblings fold under their common parent, two do not",
			recs: []*record.Record{
				rec(0, "eu1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(10000, "us1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(20000, "ap1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(30000, "a.cdn.example.org", 443, "allow", "not-allowlisted"),
				rec(40000, "b.cdn.example.org", 443, "allow", "not-allowlisted"),
				rec(50000, "ap1.blob.example.net", 8443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"a.cdn.example.org:443 TODO", "ap1.blob.example.net:8443 TODO", "b.cdn.example.org:443 TODO",
				"**.blob.example.net:443 TODO"}, fallback: true, labels: map[string]string{"app.kubernetes.io/name": "llm-server"},
				output: []string{"# folds 3 hosts seen: ap1.blob.example.net, eu1.blob.example.net, us1.blob.example.net"}},
		},
		{
			name: "no fold over a privately registered suffix nor across registrable domains",
			recs: []*record.Record{
				rec(0, "a.s3.amazonaws.com", 443, "allow", "not-allowlisted"),
				rec(10000, "b.s3.amazonaws.com", 443, "allow", "not-allowlisted"),
				rec(20000, "c.s3.amazonaws.com", 443, "allow", "not-allowlisted"),
				rec(30000, "x.example.co.uk", 443, "allow", "not-allowlisted"),
				rec(40000, "y.other.co.uk", 443, "allow", "not-allowlisted"),
				rec(50000, "z.third.co.uk", 443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"a.s3.amazonaws.com:443 TODO", "b.s3.amazonaws.com:443 TODO", "c.s3.amazonaws.com:443 TODO",
				"x.example.co.uk:443 TODO", "y.other.co.uk:443 TODO", "z.third.co.uk:443 TODO"}, fallback: true,
				labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
		{
			name: "fold -1 never folds",
			cfg:  Config{Fold: -1},
			recs: []*record.Record{
				rec(0, "eu1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(10000, "us1.blob.example.net", 443, "allow", "not-allowlisted"),
				rec(20000, "ap1.blob.example.net", 443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"ap1.blob.example.net:443 TODO", "eu1.blob.example.net:443 TODO", "us1.blob.example.net:443 TODO"},
				fallback: true, labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
		{
			name: "never suggested: never class, unknown clients, IP literals, probes, other reasons",
			recs: []*record.Record{
				rec(0, "169.254.169.254", 80, "deny", "metadata"),
				rec(1, "metadata.google.internal", 80, "deny", "metadata"),
				rec(2, "169.254.10.1", 80, "deny", "link-local"),
				rec(3, "203.0.113.7", 443, "deny", "ip-literal"),
				with(rec(4, "10.0.0.9", 443, "allow", "not-allowlisted"), func(r *record.Record) {}),
				with(rec(5, "models.example.com", 443, "deny", "unknown-client"), func(r *record.Record) { r.Client = record.Client{IP: "10.244.9.9"} }),
				with(rec(6, "models.example.com", 443, "deny", "not-allowlisted"), func(r *record.Record) { r.Probe = "negative" }),
				rec(7, "evil.example", 443, "deny", "sni-mismatch"),
				with(rec(8, "rebind.example", 443, "allow", "not-allowlisted"), func(r *record.Record) {
					r.DNS = &record.DNS{Answers: []string{"169.254.169.254"}}
				}),
				with(rec(9, "registry.corp.internal", 443, "allow", "not-allowlisted"), func(r *record.Record) { r.Peer = "10.40.3.5:443" }),
				rec(10000, "ok.example.com", 443, "allow", "not-allowlisted"),
			},
			want: want{rules: []string{"ok.example.com:443 TODO"}, fallback: true, labels: map[string]string{"app.kubernetes.io/name": "llm-server"},
				skipped: []string{"IP literals", "probe records", "reason ip-literal", "reason link-local", "reason metadata",
					"reason sni-mismatch", "unknown clients"},
				leftOut: []string{"rebind.example:443: resolved to 169.254.169.254", "registry.corp.internal:443: resolved only to private addresses (10.40.3.5)"}},
		},
		{
			name: "--cidr opens the private range the host resolved to",
			cfg:  Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.40.0.0/16")}},
			recs: []*record.Record{
				with(rec(0, "registry.corp.internal", 443, "allow", "private-address"), func(r *record.Record) { r.Peer = "10.40.3.5:443" }),
			},
			want: want{rules: []string{"registry.corp.internal:443 TODO [10.40.0.0/16]"}, fallback: true,
				labels: map[string]string{"app.kubernetes.io/name": "llm-server"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(tc.cfg, writeRecords(t, tc.recs...))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := res.WriteYAML(&out); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", out.String())
			if len(res.Policies) != 1 {
				t.Fatalf("%d policies, want 1", len(res.Policies))
			}
			sg := res.Policies[0]
			var got []string
			for _, r := range sg.Doc.Policy.Spec.Egress {
				s := r.Hosts[0] + ":" + itoa(int(r.Ports[0])) + " " + r.Purpose
				if len(r.CIDRs) > 0 {
					s += " [" + strings.Join(r.CIDRs, ",") + "]"
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want.rules, "\n") {
				t.Errorf("rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want.rules, "\n"))
			}
			if l := sg.Doc.Policy.Spec.PodSelector.MatchLabels; !equalMaps(l, tc.want.labels) || sg.Fallback != tc.want.fallback {
				t.Errorf("labels %v fallback %v", l, sg.Fallback)
			}
			for _, k := range tc.want.skipped {
				if res.Skipped[k] == 0 {
					t.Errorf("nothing skipped as %q: %v", k, res.Skipped)
				}
			}
			if len(res.Skipped) != len(tc.want.skipped) {
				t.Errorf("skipped %v, want %v", res.Skipped, tc.want.skipped)
			}
			for _, l := range tc.want.leftOut {
				if !strings.Contains(strings.Join(res.LeftOut, "\n"), l) {
					t.Errorf("left out %q, want it to name %q", res.LeftOut, l)
				}
			}
			for _, s := range tc.want.output {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q", s)
				}
			}
			replay(t, out.Bytes(), tc.recs, tc.cfg)
		})
	}
}

// replay checks what egressd check and egressd run would: the YAML parses
// and validates, lints clean, and the compiled snapshot allows every
// suggested request of the records for the pod as the pods file (or the
// fallback label) describes it.
func replay(t *testing.T, yaml []byte, recs []*record.Record, cfg Config) {
	t.Helper()
	docs, err := policy.Parse("suggested.yaml", yaml)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if err := policy.Validate(d); err != nil {
			t.Fatal(err)
		}
	}
	if ws := policy.Lint(docs, nil); len(ws) > 0 {
		t.Errorf("lint: %v", ws)
	}
	snap, err := policy.Compile(docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Verdict == "allow" && r.Reason == "allowed" || r.Client.Pod == "" || r.Probe != "" || badHost(r.Host) != "" || !suggestable[r.Reason] {
			continue
		}
		if strings.HasPrefix(r.Peer, "10.") && len(cfg.CIDRs) == 0 || r.DNS != nil {
			continue // left out on purpose (checked above)
		}
		labels := map[string]string{"app.kubernetes.io/name": r.Client.Workload.Name}
		for _, p := range cfg.Pods {
			if p.Name == r.Client.Pod {
				labels = p.Labels
			}
		}
		c := &policy.Client{Namespace: r.Client.Namespace, Pod: r.Client.Pod, ServiceAccount: r.Client.ServiceAccount, Labels: labels}
		if d := snap.Decide(policy.DecideArgs{Client: c, Host: r.Host, Port: r.Port}); !d.Allowed() {
			t.Errorf("replay: %s:%d for %s is %s (%s)", r.Host, r.Port, r.Client.Pod, d.Verdict, d.Reason)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"fold 1", Config{Fold: 1}, false},
		{"fold -1", Config{Fold: -1}, true},
		{"private cidr", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, true},
		{"unmasked", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.40.0.1/16")}}, false},
		{"public", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("93.184.0.0/16")}}, false},
		{"link-local", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}, false},
		{"over the never class", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, false},
		{"ULA holding metadata", Config{CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:ec2::/32")}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOptions)) {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestLabelsFromWorkloadWhenPodIsGone: the records name a pod the pods
// file no longer has; the selector comes from the workload's current pods.
func TestLabelsFromWorkloadWhenPodIsGone(t *testing.T) {
	r := rec(0, "models.example.com", 443, "allow", "not-allowlisted")
	r.Client.Pod = "llm-server-6c5b4-old00"
	res, err := Build(Config{Pods: pods}, writeRecords(t, r))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Policies[0].Doc.Policy.Spec.PodSelector.MatchLabels
	if !equalMaps(got, map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "inference"}) || res.Policies[0].Fallback {
		t.Errorf("labels %v", got)
	}
}

// FuzzSuggest: whatever names a workload asked for (the records hold what
// clients sent), suggest either leaves them out or writes policies that
// pass their own check; it never fails that check nor panics.
func FuzzSuggest(f *testing.F) {
	f.Add("eu1.blob.example.net", "us1.blob.example.net", "ap1.blob.example.net", 443)
	f.Add("a.s3.amazonaws.com", "b.github.io", "xn--nxasmq6b.example", 8443)
	f.Add("_srv._tcp.example.com", "x.y.co.uk", "metadata.google.internal", 1)
	f.Add("a\"b.example", "a\nb.example", "*.example.com", 65535)
	f.Fuzz(func(t *testing.T, h1, h2, h3 string, port int) {
		if port < 1 || port > 65535 {
			return
		}
		var recs []*record.Record
		for i, h := range []string{h1, h2, h3} {
			recs = append(recs, rec(i*1000, h, port, "allow", "not-allowlisted"))
		}
		res, err := Build(Config{}, writeRecords(t, recs...))
		if err != nil {
			t.Fatalf("hosts %q %q %q: %v", h1, h2, h3, err)
		}
		var out bytes.Buffer
		if err := res.WriteYAML(&out); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.Parse("fuzz", out.Bytes()); err != nil {
			t.Fatalf("output does not parse: %v\n%s", err, out.String())
		}
	})
}
