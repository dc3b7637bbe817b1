package policy

import (
	"errors"
	"strings"
	"testing"
)

const twoPolicies = `# leading comment
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata:
  name: llm-bootstrap
  namespace: llm-prod
spec:
  podSelector:
    matchLabels: {app.kubernetes.io/name: llm-server}
  serviceAccountNames: [llm-server]
  egress:
    - hosts: ["models.example.com"]
      ports: [443]
      purpose: model weights, init container
      owner: ml-platform
    - hosts: ["**.blob.example.net"]
      ports: [443]
    - hosts: ["registry.corp.internal"]
      ports: [443]
      cidrs: ["10.40.0.0/16"]
---
# only a comment: skipped, not counted
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: api, namespace: llm-prod}
spec:
  podSelector: {}
  egress:
  - hosts: [api.example.com]
    ports: [443]
...
`

func TestParse(t *testing.T) {
	docs, err := Parse("policies/llm.yaml", []byte(twoPolicies))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("got %d documents", len(docs))
	}
	if want := "policies/llm.yaml: document 1 (llm-prod/llm-bootstrap)"; docs[0].Origin != want {
		t.Errorf("origin %q, want %q", docs[0].Origin, want)
	}
	if want := "policies/llm.yaml: document 2 (llm-prod/api)"; docs[1].Origin != want {
		t.Errorf("origin %q, want %q", docs[1].Origin, want)
	}
	p := docs[0].Policy
	if p.Spec.Egress[0].Purpose != "model weights, init container" || p.Spec.Egress[2].CIDRs[0] != "10.40.0.0/16" ||
		p.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "llm-server" || p.Spec.ServiceAccountNames[0] != "llm-server" {
		t.Errorf("decoded %+v", p)
	}
	for _, d := range docs {
		if err := Validate(d); err != nil {
			t.Errorf("Validate: %v", err)
		}
	}
	if _, err := Compile(docs); err != nil {
		t.Fatal(err)
	}
}

func TestParseLists(t *testing.T) {
	tests := []struct {
		name, in string
		origins  []string
	}{
		{"v1 List", `apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: egressd.dev/v1alpha1
  kind: EgressPolicy
  metadata: {name: a, namespace: ns}
  spec: {egress: [{hosts: [a.example.com], ports: [443]}]}
- apiVersion: egressd.dev/v1alpha1
  kind: EgressPolicy
  metadata: {name: b, namespace: ns}
  spec: {egress: [{hosts: [b.example.com], ports: [443]}]}
`, []string{"f.yaml: document 1, items[0] (ns/a)", "f.yaml: document 1, items[1] (ns/b)"}},
		{"EgressPolicyList", `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicyList
items:
- apiVersion: egressd.dev/v1alpha1
  kind: EgressPolicy
  metadata: {name: a, namespace: ns}
  spec: {egress: [{hosts: [a.example.com], ports: [443]}]}
`, []string{"f.yaml: document 1, items[0] (ns/a)"}},
		{"json", `{"apiVersion":"egressd.dev/v1alpha1","kind":"EgressPolicy","metadata":{"name":"a","namespace":"ns"},"spec":{"egress":[{"hosts":["a.example.com"],"ports":[443]}]}}`,
			[]string{"f.yaml: document 1 (ns/a)"}},
		{"empty", "", nil},
		{"only separators", "---\n---\n# nothing\n...\n", nil},
		{"crlf", "---\r\napiVersion: egressd.dev/v1alpha1\r\nkind: EgressPolicy\r\nmetadata: {name: a, namespace: ns}\r\nspec: {egress: [{hosts: [a.example.com], ports: [443]}]}\r\n",
			[]string{"f.yaml: document 1 (ns/a)"}},
		{"content after marker", "--- {apiVersion: egressd.dev/v1alpha1, kind: EgressPolicy, metadata: {name: a, namespace: ns}, spec: {egress: [{hosts: [x.example.com], ports: [443]}]}}\n",
			[]string{"f.yaml: document 1 (ns/a)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Parse("f.yaml", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.Origin)
			}
			if strings.Join(got, "|") != strings.Join(tt.origins, "|") {
				t.Fatalf("origins %q, want %q", got, tt.origins)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const head = "apiVersion: egressd.dev/v1alpha1\nkind: EgressPolicy\nmetadata: {name: a, namespace: ns}\n"
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error
	}{
		{"unknown field", head + "spec: {egress: [{hostz: [a.example.com], ports: [443]}]}\n",
			[]string{"f.yaml: document 1", `unknown field "spec.egress[0].hostz"`}},
		{"case matters", head + "spec: {egress: [{Hosts: [a.example.com], ports: [443]}]}\n",
			[]string{`unknown field "spec.egress[0].Hosts"`}},
		{"duplicate field", head + "spec:\n  egress: []\n  egress: []\n",
			[]string{`key "egress" already set`}},
		{"unknown top field", head + "spec: {egress: []}\nextra: 1\n",
			[]string{`unknown field "extra"`}},
		{"wrong apiVersion", "apiVersion: egressd.dev/v1\nkind: EgressPolicy\nmetadata: {name: a}\n",
			[]string{`apiVersion "egressd.dev/v1"`, "want apiVersion egressd.dev/v1alpha1"}},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n",
			[]string{`kind "ConfigMap"`}},
		{"no kind", "a: b\n", []string{`kind ""`}},
		{"not an object", "- a\n- b\n", []string{"not an object"}},
		{"yaml syntax", head + "spec: {egress: [\n", []string{"f.yaml:", "(document 1)"}},
		{"second document line", head + "spec: {egress: []}\n---\n" + head + "spec: [: bad\n",
			[]string{"f.yaml:", "(document 2)"}},
		{"port type", head + "spec: {egress: [{hosts: [a.example.com], ports: [\"https\"]}]}\n",
			[]string{`f.yaml:4:50: spec.egress[0].ports[0]: want a port number 1-65535, got "https"`}},
		{"port overflow", head + "spec: {egress: [{hosts: [a.example.com], ports: [99999999999]}]}\n",
			[]string{`f.yaml:4:50: spec.egress[0].ports[0]: want a port number 1-65535, got 99999999999`}},
		{"list item kind", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n",
			[]string{"document 1, items[0]", `kind "Pod"`}},
		{"bad separator content", "--- [\n", []string{"document 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Parse("f.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("no error; docs %+v", docs)
			}
			if docs != nil {
				t.Fatal("documents returned with an error")
			}
			if !errors.Is(err, ErrParse) {
				t.Fatalf("%v does not wrap ErrParse", err)
			}
			for _, goType := range []string{"int32", "Go struct", "EgressRule"} {
				if strings.Contains(err.Error(), goType) {
					t.Errorf("error %q names the Go type %s", err, goType)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseJoinsEveryError(t *testing.T) {
	in := "kind: A\n---\nkind: B\n"
	_, err := Parse("f.yaml", []byte(in))
	if err == nil || !strings.Contains(err.Error(), `kind "A"`) || !strings.Contains(err.Error(), `kind "B"`) ||
		!strings.Contains(err.Error(), "document 2 (from line 2)") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(twoPolicies))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: []\n"))
	f.Add([]byte("---\n--- {a: 1}\n...\n"))
	f.Add([]byte(`{"apiVersion":"egressd.dev/v1alpha1","kind":"EgressPolicy"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.yaml", data)
		if err != nil {
			if docs != nil {
				t.Fatal("documents with an error")
			}
			return
		}
		for _, d := range docs {
			_ = Validate(d)
		}
		s, err := Compile(docs)
		if err != nil {
			return
		}
		_ = Lint(docs, nil)
		s.Decide(DecideArgs{Client: testClient("ns", nil), Host: "a.example.com", Port: 443})
	})
}
