package kube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

func TestCRDCopyIdentical(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join("..", k8stest.CRDPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(chart, kube.CRDYAML) {
		t.Fatalf("kube/crd.yaml differs from %s: cp %[1]s kube/crd.yaml", k8stest.CRDPath)
	}
}

func egp(t *testing.T, ns, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("sample: %v", err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(policy.APIVersion)
	u.SetKind(policy.Kind)
	u.SetNamespace(ns)
	return u
}

// TestCRDValidation proves against the real API server that the CRD schema
// accepts the examples and realistic policies, and rejects the malformed
// objects policy.Validate rejects where OpenAPI can express the rule.
func TestCRDValidation(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)

	t.Run("examples", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join("..", "examples", "policies", "*.yaml"))
		if len(files) == 0 {
			t.Skip("no examples/policies/*.yaml")
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := policy.Parse(f, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				b, err := yaml.Marshal(d.Policy)
				if err != nil {
					t.Fatal(err)
				}
				u := egp(t, ns, string(b))
				unstructured.RemoveNestedField(u.Object, "status")
				unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
				if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s rejected: %v", f, d.Policy.Name, err)
				}
			}
		}
	})

	good := []struct{ name, spec string }{
		{"exact", `{egress: [{hosts: [models.example.com], ports: [443]}]}`},
		{"omitted selector", `{egress: [{hosts: [api.example.com], ports: [443, 8443]}]}`},
		{"wildcards", `{podSelector: {}, egress: [{hosts: ["*.example.com", "ec2.*.amazonaws.com", "**.blob.example.net"], ports: [443]}]}`},
		{"cidrs", `{podSelector: {matchLabels: {app: x}}, egress: [{hosts: [registry.corp.internal], ports: [443], cidrs: [10.40.0.0/16, "fd00:1::/64"]}]}`},
		{"idn and upper case", `{egress: [{hosts: ["Bücher.Example", "MODELS.example.com."], ports: [1, 65535]}]}`},
		{"service accounts and expressions", `{podSelector: {matchExpressions: [{key: tier, operator: In, values: [a, b]}]}, serviceAccountNames: [llm-server], egress: [{hosts: [_srv._tcp.example.com], ports: [443], purpose: p, owner: o}]}`},
	}
	for i, tc := range good {
		t.Run("accept/"+tc.name, func(t *testing.T) {
			u := egp(t, ns, "metadata: {name: good-"+string(rune('a'+i))+"}\nspec: "+tc.spec)
			if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}

	bad := []struct{ name, spec, want string }{
		{"port 0", `{egress: [{hosts: [a.example.com], ports: [0]}]}`, "ports[0]"},
		{"port 70000", `{egress: [{hosts: [a.example.com], ports: [70000]}]}`, "ports[0]"},
		{"no hosts", `{egress: [{hosts: [], ports: [443]}]}`, "hosts"},
		{"hosts missing", `{egress: [{ports: [443]}]}`, "hosts"},
		{"ports missing", `{egress: [{hosts: [a.example.com]}]}`, "ports"},
		{"no ports", `{egress: [{hosts: [a.example.com], ports: []}]}`, "ports"},
		{"no rules", `{egress: []}`, "egress"},
		{"egress missing", `{podSelector: {}}`, "egress"},
		{"no spec", ``, "spec"},
		{"bare star", `{egress: [{hosts: ["*"], ports: [443]}]}`, "hosts[0]"},
		{"bare double star", `{egress: [{hosts: ["**"], ports: [443]}]}`, "hosts[0]"},
		{"only wildcards", `{egress: [{hosts: ["**.*"], ports: [443]}]}`, "hosts[0]"},
		{"partial label", `{egress: [{hosts: ["api*.example.com"], ports: [443]}]}`, "hosts[0]"},
		{"double star not leftmost", `{egress: [{hosts: ["a.**.example.com"], ports: [443]}]}`, "hosts[0]"},
		{"empty label", `{egress: [{hosts: ["a..example.com"], ports: [443]}]}`, "hosts[0]"},
		{"space", `{egress: [{hosts: ["a example.com"], ports: [443]}]}`, "hosts[0]"},
		{"too long", `{egress: [{hosts: ["` + strings.Repeat("a.", 127) + `com"], ports: [443]}]}`, "hosts[0]"},
		{"bad cidr", `{egress: [{hosts: [a.example.com], ports: [443], cidrs: [10.0.0.0/33]}]}`, "cidrs[0]"},
		{"not a cidr", `{egress: [{hosts: [a.example.com], ports: [443], cidrs: [corp]}]}`, "cidrs[0]"},
		{"bad operator", `{podSelector: {matchExpressions: [{key: a, operator: Maybe}]}, egress: [{hosts: [a.example.com], ports: [443]}]}`, "operator"},
		{"bad service account", `{serviceAccountNames: [Not_Valid], egress: [{hosts: [a.example.com], ports: [443]}]}`, "serviceAccountNames[0]"},
		{"port as string", `{egress: [{hosts: [a.example.com], ports: ["443"]}]}`, "ports[0]"},
	}
	for _, tc := range bad {
		t.Run("reject/"+tc.name, func(t *testing.T) {
			doc := "metadata: {name: bad}\n"
			if tc.spec != "" {
				doc += "spec: " + tc.spec
			}
			_, err := res.Create(ctx, egp(t, ns, doc), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
