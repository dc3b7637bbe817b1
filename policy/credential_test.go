package policy

import (
	"errors"
	"net/textproto"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// credRule is llmRule with the credential of docs/design.md
// "Credentials".
func credRule() EgressRule {
	r := llmRule()
	r.Credential = &Credential{Name: "openai"}
	return r
}

func TestValidateCredential(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*EgressRule)
		field string // "" = valid
		value string
		why   string
	}{
		{"defaults", func(*EgressRule) {}, "", "", ""},
		{"header and format", func(r *EgressRule) { r.Credential.Header, r.Credential.Format = "x-api-key", "{}" }, "", "", ""},
		{"token header", func(r *EgressRule) { r.Credential.Header = "X-Key!#$%&'*+-.^_`|~9" }, "", "", ""},
		{"format with suffix", func(r *EgressRule) { r.Credential.Format = "Token key={}; v=2" }, "", "", ""},
		{"dotted name", func(r *EgressRule) { r.Credential.Name = "openai.prod_key-2" }, "", "", ""},
		{"without inspect", func(r *EgressRule) { r.Inspect, r.HTTP = false, nil }, "spec.egress[0].credential", "", "needs inspect: true"},
		{"wildcard host", func(r *EgressRule) { r.Hosts = []string{"api.llm.example", "*.llm.example"} }, "spec.egress[0].hosts[1]", "*.llm.example", "without wildcards"},
		{"double wildcard host", func(r *EgressRule) { r.Hosts = []string{"**.llm.example"} }, "spec.egress[0].hosts[0]", "**.llm.example", "without wildcards"},
		{"inner wildcard host", func(r *EgressRule) { r.Hosts = []string{"api.*.llm.example"} }, "spec.egress[0].hosts[0]", "api.*.llm.example", "without wildcards"},
		{"no name", func(r *EgressRule) { r.Credential.Name = "" }, "spec.egress[0].credential.name", "", "required"},
		{"name with slash", func(r *EgressRule) { r.Credential.Name = "../etc/passwd" }, "spec.egress[0].credential.name", "../etc/passwd", "Secret key"},
		{"name dotdot", func(r *EgressRule) { r.Credential.Name = "..data" }, "spec.egress[0].credential.name", "..data", "Secret key"},
		{"name dot", func(r *EgressRule) { r.Credential.Name = "." }, "spec.egress[0].credential.name", ".", "Secret key"},
		{"name space", func(r *EgressRule) { r.Credential.Name = "open ai" }, "spec.egress[0].credential.name", "open ai", "Secret key"},
		{"header space", func(r *EgressRule) { r.Credential.Header = "X Key" }, "spec.egress[0].credential.header", "X Key", "RFC 9110"},
		{"header colon", func(r *EgressRule) { r.Credential.Header = "X-Key:" }, "spec.egress[0].credential.header", "X-Key:", "RFC 9110"},
		{"header pseudo", func(r *EgressRule) { r.Credential.Header = ":authority" }, "spec.egress[0].credential.header", ":authority", "RFC 9110"},
		{"header non-ascii", func(r *EgressRule) { r.Credential.Header = "X-Schlüssel" }, "spec.egress[0].credential.header", "X-Schlüssel", "RFC 9110"},
		{"header host", func(r *EgressRule) { r.Credential.Header = "host" }, "spec.egress[0].credential.header", "host", "egressd owns"},
		{"header proxy", func(r *EgressRule) { r.Credential.Header = "Proxy-Authorization" }, "spec.egress[0].credential.header", "Proxy-Authorization", "Proxy-*"},
		{"header connection", func(r *EgressRule) { r.Credential.Header = "CONNECTION" }, "spec.egress[0].credential.header", "CONNECTION", "egressd owns"},
		{"header te", func(r *EgressRule) { r.Credential.Header = "Transfer-Encoding" }, "spec.egress[0].credential.header", "Transfer-Encoding", "egressd owns"},
		{"header length", func(r *EgressRule) { r.Credential.Header = "content-length" }, "spec.egress[0].credential.header", "content-length", "egressd owns"},
		{"header upgrade", func(r *EgressRule) { r.Credential.Header = "Upgrade" }, "spec.egress[0].credential.header", "Upgrade", "egressd owns"},
		{"header egressd", func(r *EgressRule) { r.Credential.Header = "x-egressd-reason" }, "spec.egress[0].credential.header", "x-egressd-reason", "X-Egressd-*"},
		{"header egressd probe", func(r *EgressRule) { r.Credential.Header = "Egressd-Probe" }, "spec.egress[0].credential.header", "Egressd-Probe", "Egressd-*"},
		{"format without placeholder", func(r *EgressRule) { r.Credential.Format = "Bearer" }, "spec.egress[0].credential.format", "Bearer", "exactly once"},
		{"format twice", func(r *EgressRule) { r.Credential.Format = "{} {}" }, "spec.egress[0].credential.format", "{} {}", "exactly once"},
		{"format stray brace", func(r *EgressRule) { r.Credential.Format = "{Bearer {}" }, "spec.egress[0].credential.format", "{Bearer {}", "no brace"},
		{"format escaped", func(r *EgressRule) { r.Credential.Format = "{{}}" }, "spec.egress[0].credential.format", "{{}}", "no brace"},
		{"format newline", func(r *EgressRule) { r.Credential.Format = "Bearer {}\r\nX-Evil: 1" }, "spec.egress[0].credential.format", "Bearer {}\r\nX-Evil: 1", "no line break"},
		{"format trailing space", func(r *EgressRule) { r.Credential.Format = "{} " }, "spec.egress[0].credential.format", "{} ", "either end"},
		{"format non-ascii", func(r *EgressRule) { r.Credential.Format = "Clé {}" }, "spec.egress[0].credential.format", "Clé {}", "non-ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := credRule()
			tt.edit(&r)
			wantFieldError(t, ValidateWith(doc("prod", "p", metav1.LabelSelector{}, nil, r), inspectOn), tt.field, tt.value, tt.why)
		})
	}
}

func TestParseCredential(t *testing.T) {
	in := `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: prod}
spec:
  egress:
    - hosts: ["api.llm.example"]
      ports: [443]
      inspect: true
      credential:
        name: openai
        header: x-api-key
        format: "{}"
`
	docs, err := Parse("llm.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c := docs[0].Policy.Spec.Egress[0].Credential; c == nil || *c != (Credential{Name: "openai", Header: "x-api-key", Format: "{}"}) {
		t.Fatalf("parsed %+v", c)
	}
	bad := strings.Replace(in, "format:", "value:", 1)
	if _, err := Parse("llm.yaml", []byte(bad)); !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "credential.value") {
		t.Fatalf("Parse(value:) = %v; want the unknown field named", err)
	}
}

// TestDecisionCarriesCredential: the decision of a credential rule names
// it with its defaults applied, and AddsCredential says when it goes on a
// request: never on a denial, a softened allow, another rule's request or
// a blind rule's tunnel.
func TestDecisionCarriesCredential(t *testing.T) {
	for _, mode := range []Mode{ModeEnforce, ModeAudit} {
		t.Run(string(mode), func(t *testing.T) {
			withKey := credRule()
			custom := rule([]int32{443}, "blob.llm.example")
			custom.Inspect = true
			custom.Credential = &Credential{Name: "blob", Header: "x-api-key", Format: "Key {}"}
			d := doc("prod", "llm", metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}, nil, withKey, custom)
			d.Policy.Spec.Mode = mode
			// Another policy allows the same host to other pods, without a
			// credential.
			other := rule([]int32{443}, "api.llm.example")
			other.Inspect = true
			o := doc("prod", "web", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, nil, other)
			o.Policy.Spec.Mode = mode
			s, err := CompileWith([]Document{d, o}, inspectOn)
			if err != nil {
				t.Fatal(err)
			}
			llm, web := testClient("prod", map[string]string{"app": "llm"}), testClient("prod", map[string]string{"app": "web"})

			tunnel := s.Decide(DecideArgs{Client: llm, Host: "api.llm.example", Port: 443})
			want := Credential{Name: "openai", Header: "Authorization", Format: "Bearer {}"}
			if c := tunnel.AddsCredential(); c == nil || *c != want {
				t.Fatalf("AddsCredential() = %+v; want %+v", c, want)
			}
			if c := s.DecideRequest(tunnel, "POST", "/v1/chat/completions").AddsCredential(); c == nil || *c != want {
				t.Fatalf("allowed request: AddsCredential() = %+v; want %+v", c, want)
			}
			denied := s.DecideRequest(tunnel, "DELETE", "/v1/chat/completions")
			if denied.Reason != ReasonMethodNotAllowed || denied.AddsCredential() != nil {
				t.Fatalf("denied request %+v: AddsCredential() = %+v; want nil", denied, denied.AddsCredential())
			}
			if c := tunnel.Deny(ReasonHostMismatch).AddsCredential(); c != nil {
				t.Fatalf("host-mismatch: AddsCredential() = %+v; want nil", c)
			}
			blob := s.Decide(DecideArgs{Client: llm, Host: "blob.llm.example", Port: 443})
			wantBlob := Credential{Name: "blob", Header: "X-Api-Key", Format: "Key {}"}
			if c := blob.AddsCredential(); c == nil || *c != wantBlob {
				t.Fatalf("blob: AddsCredential() = %+v; want %+v", c, wantBlob)
			}
			if p, sfx := blob.Credential.Split(); p != "Key " || sfx != "" {
				t.Fatalf("Split() = %q, %q", p, sfx)
			}
			if c := s.Decide(DecideArgs{Client: web, Host: "api.llm.example", Port: 443}).AddsCredential(); c != nil {
				t.Fatalf("another policy's pod: AddsCredential() = %+v; want nil", c)
			}
			un := tunnel.Deny(ReasonCredentialUnavailable)
			if un.Allowed() || un.WouldDeny || un.Policy != "prod/llm" || un.AddsCredential() != nil {
				t.Fatalf("credential-unavailable = %+v; want a denial in every mode, keeping the rule", un)
			}
			if got := s.Credentials(); len(got) != 2 || got[0] != want || got[1] != wantBlob {
				t.Fatalf("Credentials() = %+v", got)
			}
		})
	}
}

// TestAddsCredentialNotWhenSoftened: a request audit mode lets through
// although its rule denies it goes out without the credential.
func TestAddsCredentialNotWhenSoftened(t *testing.T) {
	d := doc("prod", "llm", metav1.LabelSelector{}, nil, credRule())
	d.Policy.Spec.Mode = ModeAudit
	s, err := CompileWith([]Document{d}, inspectOn)
	if err != nil {
		t.Fatal(err)
	}
	tunnel := s.Decide(DecideArgs{Client: testClient("prod", nil), Host: "api.llm.example", Port: 443})
	soft := s.DecideRequest(tunnel, "DELETE", "/v1/chat/completions")
	if !soft.Allowed() || !soft.WouldDeny || soft.AddsCredential() != nil {
		t.Fatalf("softened %+v: AddsCredential() = %+v; want nil", soft, soft.AddsCredential())
	}
}

// FuzzCredentialHeader holds CheckCredentialHeader to x/net's field name
// check: whatever it accepts is a valid field name, and every valid field
// name it refuses is one egressd owns.
func FuzzCredentialHeader(f *testing.F) {
	for _, s := range []string{"Authorization", "x-api-key", "Host", "proxy-x", "X-Egressd-A", "a b", "a:b", ":path", "", "ü", "X\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		err := CheckCredentialHeader(h)
		valid := httpguts.ValidHeaderFieldName(h)
		if err == nil && !valid {
			t.Fatalf("accepted %q, not a field name", h)
		}
		if err != nil && valid && !strings.Contains(err.Error(), "egressd owns") {
			t.Fatalf("refused the field name %q: %v", h, err)
		}
		if err == nil && strings.HasPrefix(textproto.CanonicalMIMEHeaderKey(h), "Proxy-") {
			t.Fatalf("accepted %q", h)
		}
	})
}

// FuzzCredentialFormat: an accepted format has one placeholder, and any
// field value put in it makes a valid field value with the value inside,
// whole.
func FuzzCredentialFormat(f *testing.F) {
	for _, s := range []string{"Bearer {}", "{}", "Token {} x", "{{}}", "{} {}", "a\r\n{}", " {}", "{}\t", "\x7f{}"} {
		f.Add(s, "sk-123")
	}
	f.Fuzz(func(t *testing.T, format, value string) {
		if CheckCredentialFormat(format) != nil {
			return
		}
		c := Credential{Name: "x", Format: format}
		p, sfx := c.Split()
		if p+Placeholder+sfx != format {
			t.Fatalf("Split(%q) = %q, %q", format, p, sfx)
		}
		if !httpguts.ValidHeaderFieldValue(p + sfx) {
			t.Fatalf("accepted %q: not a field value around its value", format)
		}
		if httpguts.ValidHeaderFieldValue(value) && !httpguts.ValidHeaderFieldValue(p+value+sfx) {
			t.Fatalf("format %q with value %q: not a field value", format, value)
		}
	})
}
