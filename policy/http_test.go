package policy

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var inspectOn = ValidateOptions{InspectAvailable: true}

// llmRule is the inspected rule of docs/design.md "Inspection".
func llmRule() EgressRule {
	r := rule([]int32{443}, "api.llm.example")
	r.Inspect = true
	r.HTTP = []HTTPRule{
		{Methods: []string{"POST"}, Paths: []string{"/v1/chat/completions", "/v1/responses"}},
		{Methods: []string{"GET"}, Paths: []string{"/v1/models", "/v1/models/*"}},
		{Methods: []string{"GET", "HEAD"}, Paths: []string{"/files/**"}},
		{Paths: []string{"/any-method"}},
	}
	return r
}

func TestValidateInspect(t *testing.T) {
	tests := []struct {
		name  string
		opts  ValidateOptions
		edit  func(*EgressRule)
		field string // "" = valid
		value string
		why   string
	}{
		{"valid", inspectOn, func(*EgressRule) {}, "", "", ""},
		{"inspect without http", inspectOn, func(r *EgressRule) { r.HTTP = nil }, "", "", ""},
		{"inspect unavailable", ValidateOptions{}, func(*EgressRule) {}, "spec.egress[0].inspect", "true", "not available"},
		{"inspect unavailable without http", ValidateOptions{}, func(r *EgressRule) { r.HTTP = nil }, "spec.egress[0].inspect", "true", "--inspect-ca-cert"},
		{"http without inspect", inspectOn, func(r *EgressRule) { r.Inspect = false }, "spec.egress[0].http", "", "need inspect: true"},
		{"address rule", inspectOn, func(r *EgressRule) { r.Hosts, r.CIDRs = nil, []string{"10.0.0.0/24"} }, "spec.egress[0].inspect", "true", "address rule"},
		{"empty entry", inspectOn, func(r *EgressRule) { r.HTTP = append(r.HTTP, HTTPRule{}) }, "spec.egress[0].http[4]", "", "omit http"},
		{"lower case method", inspectOn, func(r *EgressRule) { r.HTTP[0].Methods = []string{"post"} }, "spec.egress[0].http[0].methods[0]", "post", "write GET"},
		{"mixed case method", inspectOn, func(r *EgressRule) { r.HTTP[1].Methods = []string{"GET", "Get"} }, "spec.egress[0].http[1].methods[1]", "Get", "upper case"},
		{"empty method", inspectOn, func(r *EgressRule) { r.HTTP[0].Methods = []string{""} }, "spec.egress[0].http[0].methods[0]", "", "empty method"},
		{"method with space", inspectOn, func(r *EgressRule) { r.HTTP[0].Methods = []string{"GET POST"} }, "spec.egress[0].http[0].methods[0]", "GET POST", "upper case"},
		{"custom method", inspectOn, func(r *EgressRule) { r.HTTP[0].Methods = []string{"PROPFIND", "M-SEARCH"} }, "", "", ""},
		{"relative path", inspectOn, func(r *EgressRule) { r.HTTP[0].Paths = []string{"v1/x"} }, "spec.egress[0].http[0].paths[0]", "v1/x", "not an absolute path"},
		{"empty path", inspectOn, func(r *EgressRule) { r.HTTP[0].Paths = []string{""} }, "spec.egress[0].http[0].paths[0]", "", "not an absolute path"},
		{"dotdot path", inspectOn, func(r *EgressRule) { r.HTTP[1].Paths = []string{"/v1/models/../admin"} }, "spec.egress[0].http[1].paths[0]", "/v1/models/../admin", `".." segment`},
		{"double slash path", inspectOn, func(r *EgressRule) { r.HTTP[1].Paths = []string{"/v1//models"} }, "spec.egress[0].http[1].paths[0]", "/v1//models", "empty segment"},
		{"encoded slash path", inspectOn, func(r *EgressRule) { r.HTTP[1].Paths = []string{"/v1%2Fmodels"} }, "spec.egress[0].http[1].paths[0]", "/v1%2Fmodels", "encoded '/'"},
		{"inner wildcard", inspectOn, func(r *EgressRule) { r.HTTP[1].Paths = []string{"/v1/*/models"} }, "spec.egress[0].http[1].paths[0]", "/v1/*/models", "whole last segment"},
		{"query in path", inspectOn, func(r *EgressRule) { r.HTTP[1].Paths = []string{"/v1/models?a=b"} }, "spec.egress[0].http[1].paths[0]", "/v1/models?a=b", "query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := llmRule()
			tt.edit(&r)
			d := doc("prod", "p", metav1.LabelSelector{}, nil, r)
			wantFieldError(t, ValidateWith(d, tt.opts), tt.field, tt.value, tt.why)
		})
	}
}

// wantFieldError fails unless err is nil for field "", else a *FieldError
// wrapping ErrInvalid of field and value whose text says why.
func wantFieldError(t *testing.T, err error, field, value, why string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("ValidateWith: %v", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateWith = %v; want a *FieldError wrapping ErrInvalid", err)
	}
	if fe.Field != field || fe.Value != value || !strings.Contains(err.Error(), why) {
		t.Fatalf("FieldError %+v (%v); want field %q value %q saying %q", fe, err, field, value, why)
	}
}

// TestCompileRefusesInspectUnavailable: every caller today compiles
// without InspectAvailable, so an inspect rule is refused at load and the
// previous snapshot stays in force.
func TestCompileRefusesInspectUnavailable(t *testing.T) {
	d := doc("prod", "p", metav1.LabelSelector{}, nil, llmRule())
	if _, err := Compile([]Document{d}); !errors.Is(err, ErrInspectUnavailable) {
		t.Fatalf("Compile = %v; want ErrInspectUnavailable", err)
	}
	if err := Validate(d); !errors.Is(err, ErrInspectUnavailable) {
		t.Fatalf("Validate = %v; want ErrInspectUnavailable", err)
	}
	if _, err := CompileWith([]Document{d}, inspectOn); err != nil {
		t.Fatalf("CompileWith(InspectAvailable) = %v", err)
	}
}

func TestParseInspectFields(t *testing.T) {
	in := `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: prod}
spec:
  egress:
    - hosts: ["api.llm.example"]
      ports: [443]
      inspect: true
      http:
        - methods: [POST]
          paths: ["/v1/chat/completions"]
`
	docs, err := Parse("llm.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := docs[0].Policy.Spec.Egress[0]
	if !r.Inspect || len(r.HTTP) != 1 || r.HTTP[0].Methods[0] != "POST" || r.HTTP[0].Paths[0] != "/v1/chat/completions" {
		t.Fatalf("parsed %+v", r)
	}
	bad := strings.Replace(in, "paths:", "path:", 1)
	if _, err := Parse("llm.yaml", []byte(bad)); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "http[0].path") {
		t.Fatalf("Parse(path:) = %v; want the unknown field named", err)
	}
}

func inspectSnapshot(t testing.TB, mode Mode) *Snapshot {
	t.Helper()
	plain := rule([]int32{443}, "plain.example")
	open := rule([]int32{443}, "open.example")
	open.Inspect = true
	getOnly := rule([]int32{443}, "get.example")
	getOnly.Inspect, getOnly.HTTP = true, []HTTPRule{{Methods: []string{"GET"}}}
	d := doc("prod", "llm", metav1.LabelSelector{}, nil, llmRule(), plain, open, getOnly)
	d.Policy.Spec.Mode = mode
	s, err := CompileWith([]Document{d}, inspectOn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecideRequest(t *testing.T) {
	tests := []struct {
		name, host, method, target string
		want                       Reason
	}{
		{"allowed post", "api.llm.example", "POST", "/v1/chat/completions", ReasonAllowed},
		{"allowed with query", "api.llm.example", "POST", "/v1/responses?stream=true", ReasonAllowed},
		{"allowed get one segment", "api.llm.example", "GET", "/v1/models/gpt-x", ReasonAllowed},
		{"allowed get many", "api.llm.example", "GET", "/files/a/b/c.bin", ReasonAllowed},
		{"allowed head many", "api.llm.example", "HEAD", "/files/a", ReasonAllowed},
		{"any method entry", "api.llm.example", "DELETE", "/any-method", ReasonAllowed},
		{"any path entry", "get.example", "GET", "/whatever/else", ReasonAllowed},
		{"any path entry other method", "get.example", "PUT", "/whatever/else", ReasonMethodNotAllowed},
		{"escaped path allowed", "api.llm.example", "GET", "/v1/%6dodels", ReasonAllowed},
		{"wrong method", "api.llm.example", "GET", "/v1/chat/completions", ReasonMethodNotAllowed},
		{"lower case method", "api.llm.example", "post", "/v1/chat/completions", ReasonMethodNotAllowed},
		{"unlisted path", "api.llm.example", "POST", "/v1/files", ReasonPathNotAllowed},
		{"trailing slash", "api.llm.example", "POST", "/v1/chat/completions/", ReasonPathNotAllowed},
		{"one segment too deep", "api.llm.example", "GET", "/v1/models/a/b", ReasonPathNotAllowed},
		{"many needs one", "api.llm.example", "GET", "/files/", ReasonPathNotAllowed},
		{"case sensitive", "api.llm.example", "POST", "/V1/chat/completions", ReasonPathNotAllowed},
		{"dotdot", "api.llm.example", "GET", "/v1/models/../../admin", ReasonBadRequest},
		{"encoded dotdot", "api.llm.example", "GET", "/v1/models/%2e%2e/x", ReasonBadRequest},
		{"double slash", "api.llm.example", "POST", "//v1/chat/completions", ReasonBadRequest},
		{"encoded slash", "api.llm.example", "GET", "/v1/models%2Fgpt", ReasonBadRequest},
		{"encoded NUL", "api.llm.example", "GET", "/v1/models/a%00", ReasonBadRequest},
		{"empty target", "api.llm.example", "GET", "", ReasonBadRequest},
		{"asterisk", "api.llm.example", "OPTIONS", "*", ReasonBadRequest},
		{"inspect without http", "open.example", "DELETE", "/anything/at/all", ReasonAllowed},
		{"inspect without http unclean", "open.example", "GET", "/a/../b", ReasonBadRequest},
		{"not inspected", "plain.example", "GET", "/a/../b", ReasonAllowed},
	}
	s := inspectSnapshot(t, ModeEnforce)
	c := testClient("prod", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tunnel := s.Decide(DecideArgs{Client: c, Host: tt.host, Port: 443})
			if !tunnel.Allowed() {
				t.Fatalf("tunnel %+v", tunnel)
			}
			before := tunnel
			got := s.DecideRequest(tunnel, tt.method, tt.target)
			if got.Reason != tt.want {
				t.Fatalf("DecideRequest(%s %s) = %+v; want reason %s", tt.method, tt.target, got, tt.want)
			}
			if got.Allowed() != (tt.want == ReasonAllowed) || got.WouldDeny {
				t.Fatalf("DecideRequest(%s %s) = %+v", tt.method, tt.target, got)
			}
			if tt.want != ReasonBadRequest && (got.Policy != "prod/llm" || got.Rule != tunnel.Rule) {
				t.Fatalf("DecideRequest = %+v; want the tunnel's policy and rule", got)
			}
			if tunnel.Reason != before.Reason || tunnel.Verdict != before.Verdict {
				t.Fatal("the tunnel's decision was edited")
			}
		})
	}
}

func TestDecideRequestAuditMode(t *testing.T) {
	s := inspectSnapshot(t, ModeAudit)
	tunnel := s.Decide(DecideArgs{Client: testClient("prod", nil), Host: "api.llm.example", Port: 443})
	if !s.Inspects(tunnel) {
		t.Fatalf("Inspects(%+v) = false", tunnel)
	}
	for _, tt := range []struct {
		method, target string
		want           Reason
		allowed, would bool
	}{
		{"GET", "/v1/chat/completions", ReasonMethodNotAllowed, true, true},
		{"POST", "/v1/other", ReasonPathNotAllowed, true, true},
		{"POST", "/v1/chat/completions", ReasonAllowed, true, false},
		{"GET", "/a/../b", ReasonBadRequest, false, false}, // malformed: refused in every mode
	} {
		got := s.DecideRequest(tunnel, tt.method, tt.target)
		if got.Reason != tt.want || got.Allowed() != tt.allowed || got.WouldDeny != tt.would {
			t.Errorf("audit DecideRequest(%s %s) = %+v; want %s allowed=%v would_deny=%v", tt.method, tt.target, got, tt.want, tt.allowed, tt.would)
		}
	}
}

func TestInspects(t *testing.T) {
	s := inspectSnapshot(t, ModeEnforce)
	c := testClient("prod", nil)
	for _, tt := range []struct {
		name string
		d    Decision
		want bool
	}{
		{"inspect rule", s.Decide(DecideArgs{Client: c, Host: "api.llm.example", Port: 443}), true},
		{"inspect without http", s.Decide(DecideArgs{Client: c, Host: "open.example", Port: 443}), true},
		{"plain rule", s.Decide(DecideArgs{Client: c, Host: "plain.example", Port: 443}), false},
		{"denied", s.Decide(DecideArgs{Client: c, Host: "api.llm.example", Port: 80}), false},
		{"unknown policy", Decision{Verdict: Allow, Policy: "prod/other", Rule: 0, Inspect: true}, false},
		{"rule out of range", Decision{Verdict: Allow, Policy: "prod/llm", Rule: 7, Inspect: true}, false},
		{"inspect field unset", Decision{Verdict: Allow, Policy: "prod/llm", Rule: 0}, false},
		{"softened", s.Decide(DecideArgs{Client: c, Host: "api.llm.example", Port: 443}).Deny(ReasonPrivate), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Inspects(tt.d); got != tt.want {
				t.Fatalf("Inspects(%+v) = %v; want %v", tt.d, got, tt.want)
			}
		})
	}
	var nilSnap *Snapshot
	if nilSnap.Inspects(Decision{Verdict: Allow, Policy: "prod/llm", Inspect: true}) {
		t.Fatal("a nil snapshot inspects")
	}
}

func TestDecideRequestNoAlloc(t *testing.T) {
	s := inspectSnapshot(t, ModeEnforce)
	tunnel := s.Decide(DecideArgs{Client: testClient("prod", nil), Host: "api.llm.example", Port: 443})
	n := testing.AllocsPerRun(100, func() {
		if d := s.DecideRequest(tunnel, "GET", "/v1/models/gpt?x=1"); !d.Allowed() {
			t.Fatal(d)
		}
		if d := s.DecideRequest(tunnel, "GET", "/v1/files"); d.Allowed() {
			t.Fatal(d)
		}
	})
	if n != 0 {
		t.Fatalf("DecideRequest allocates %v times; want 0", n)
	}
}

func TestLintInspect(t *testing.T) {
	inspect := func(r EgressRule) EgressRule { r.Inspect = true; return r }
	tests := []struct {
		name  string
		rules []EgressRule
		want  []string
	}{
		{"inspect alone", []EgressRule{llmRule(), rule([]int32{443}, "other.example")}, nil},
		{"other port", []EgressRule{inspect(rule([]int32{443}, "**.llm.example")), rule([]int32{80}, "api.llm.example")}, nil},
		{"blind first", []EgressRule{rule([]int32{443}, "api.llm.example"), inspect(rule([]int32{443}, "**.llm.example"))},
			[]string{`spec.egress[1] inspects "**.llm.example", but spec.egress[0] allows "api.llm.example" without inspect and comes first`}},
		{"wildcard inspect first", []EgressRule{inspect(rule([]int32{443}, "*.llm.example")), rule([]int32{443}, "api.llm.example")},
			[]string{`spec.egress[1] allows "api.llm.example" without inspect, but spec.egress[0] inspects "*.llm.example" and comes first`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, w := range Lint([]Document{doc("ns", "p", metav1.LabelSelector{}, nil, tt.rules...)}, nil) {
				if strings.Contains(w.Message, "inspect") {
					got = append(got, w.Message)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("inspect warnings %q; want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q; want %q", got[i], w)
				}
			}
		})
	}
}
