package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

// TestCRDMirrorsValidate: for the fields of contract revision 2 (spec.mode,
// phase, ech, address rules) and 3 (inspect, http), the real API server and
// policy.Validate (of an instance that can inspect) accept and reject the
// same specs, so a policy kubectl accepts is one egressd enforces.
func TestCRDMirrorsValidate(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)

	tests := []struct {
		name, spec string
		ok         bool
		field      string // named in both errors when !ok
	}{
		{"mode audit", `{mode: audit, egress: [{hosts: [a.example.com], ports: [443]}]}`, true, ""},
		{"mode enforce", `{mode: enforce, egress: [{hosts: [a.example.com], ports: [443]}]}`, true, ""},
		{"mode permissive", `{mode: permissive, egress: [{hosts: [a.example.com], ports: [443]}]}`, false, "spec.mode"},
		{"phase init", `{egress: [{hosts: [weights.example.com], ports: [443], phase: init}]}`, true, ""},
		{"phase boot", `{egress: [{hosts: [weights.example.com], ports: [443], phase: boot}]}`, false, "spec.egress[0].phase"},
		{"ech allow", `{egress: [{hosts: [front.example.com], ports: [443], ech: allow}]}`, true, ""},
		{"ech yes", `{egress: [{hosts: [front.example.com], ports: [443], ech: "yes"}]}`, false, "spec.egress[0].ech"},
		{"address rule", `{egress: [{cidrs: [10.40.0.0/16], ports: [5432]}]}`, true, ""},
		{"address rule with empty hosts", `{egress: [{hosts: [], cidrs: ["fd00:1::/48"], ports: [5432]}]}`, true, ""},
		{"hosts and cidrs", `{egress: [{hosts: [registry.corp.internal], cidrs: [10.40.0.0/16], ports: [443]}]}`, true, ""},
		{"neither hosts nor cidrs", `{egress: [{ports: [443]}]}`, false, "spec.egress[0].hosts"},
		{"empty hosts, no cidrs", `{egress: [{hosts: [], ports: [443]}]}`, false, "spec.egress[0].hosts"},
		{"empty hosts and cidrs", `{egress: [{hosts: [], cidrs: [], ports: [443]}]}`, false, "spec.egress[0].hosts"},
		{"second rule without hosts", `{egress: [{hosts: [a.example.com], ports: [443]}, {ports: [80]}]}`, false, "spec.egress[1].hosts"},
		{"all new fields", `{mode: audit, egress: [{hosts: [w.example.com], ports: [443], phase: init, ech: allow}, {cidrs: [10.0.0.0/24], ports: [443], phase: init}]}`, true, ""},
		// Revision 3: inspect and http.
		{"inspect", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: true}]}`, true, ""},
		{"inspect false", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: false}]}`, true, ""},
		{"inspect with http", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: true, http: [{methods: [POST], paths: [/v1/chat/completions]}, {methods: [GET], paths: [/v1/models, "/v1/models/*", "/files/**"]}]}]}`, true, ""},
		{"http without inspect", `{egress: [{hosts: [api.llm.example], ports: [443], http: [{methods: [GET]}]}]}`, false, "spec.egress[0].http"},
		{"http with inspect false", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: false, http: [{methods: [GET]}]}]}`, false, "spec.egress[0].http"},
		{"lower case method", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: true, http: [{methods: [get]}]}]}`, false, "spec.egress[0].http[0].methods[0]"},
		{"relative path", `{egress: [{hosts: [api.llm.example], ports: [443], inspect: true, http: [{paths: [v1/models]}]}]}`, false, "spec.egress[0].http[0].paths[0]"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf("metadata: {name: mirror-%d}\nspec: %s", i, tc.spec)
			_, apiErr := res.Create(ctx, egp(t, ns, doc), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})

			var p policy.EgressPolicy
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatal(err)
			}
			p.Namespace = ns
			valErr := policy.ValidateWith(policy.Document{Origin: "test", Policy: p}, policy.ValidateOptions{InspectAvailable: true})

			if (apiErr == nil) != tc.ok || (valErr == nil) != tc.ok {
				t.Fatalf("want ok %v; API server: %v; Validate: %v", tc.ok, apiErr, valErr)
			}
			if !tc.ok && (!strings.Contains(apiErr.Error(), tc.field) || !strings.Contains(valErr.Error(), tc.field)) {
				t.Fatalf("errors do not both name %s:\nAPI server: %v\nValidate: %v", tc.field, apiErr, valErr)
			}
		})
	}
}

// TestCRDModeColumn: `kubectl get egresspolicies` shows the mode (the
// Table the API server renders for kubectl).
func TestCRDModeColumn(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	res := env.Dynamic.Resource(kube.EgressPolicyResource).Namespace(ns)
	for name, spec := range map[string]string{
		"onboarding": `{mode: audit, egress: [{hosts: [a.example.com], ports: [443]}]}`,
		"default":    `{egress: [{hosts: [a.example.com], ports: [443]}]}`,
	} {
		if _, err := res.Create(ctx, egp(t, ns, "metadata: {name: "+name+"}\nspec: "+spec), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := env.Client.Discovery().RESTClient().Get().
		AbsPath("/apis", policy.Group, policy.Version, "namespaces", ns, "egresspolicies").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	col := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Mode" })
	if col < 0 {
		t.Fatalf("no Mode column: %+v", table.ColumnDefinitions)
	}
	got := map[string]any{}
	for _, row := range table.Rows {
		got[fmt.Sprint(row.Cells[0])] = row.Cells[col]
	}
	if got["onboarding"] != "audit" || (got["default"] != nil && got["default"] != "") {
		t.Fatalf("Mode cells %v", got)
	}
}
