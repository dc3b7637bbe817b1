package probe

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Check
	}{
		{"documented example", `# probes for llm-server
checks:
  - name: models
    host: models.example.com
    port: 443
    expect: allow
    dns: true
  - name: pastebin
    host: pastebin.example.org
    port: 443
    expect: deny
    reason: not-allowlisted
`, []Check{
			{Name: "models", Host: "models.example.com", Port: 443, Expect: ExpectAllow, DNS: true},
			{Name: "pastebin", Host: "pastebin.example.org", Port: 443, Expect: ExpectDeny, Reason: "not-allowlisted"},
		}},
		{"flow style, leading document marker", "---\n{checks: [{name: a, host: a.example.com, port: 80, expect: deny}]}\n",
			[]Check{{Name: "a", Host: "a.example.com", Port: 80, Expect: ExpectDeny}}},
		{"content on the marker's line, an end marker, comments after", "--- {checks: [{name: a, host: a.example.com, port: 80, expect: deny}]}\n...\n# the end\n",
			[]Check{{Name: "a", Host: "a.example.com", Port: 80, Expect: ExpectDeny}}},
		{"an empty document after the checks", "checks: [{name: a, host: a.example.com, port: 80, expect: deny}]\n---\n",
			[]Check{{Name: "a", Host: "a.example.com", Port: 80, Expect: ExpectDeny}}},
		{"host normalized: upper case, trailing dot", "checks: [{name: a, host: Models.Example.COM., port: 443, expect: allow}]",
			[]Check{{Name: "a", Host: "models.example.com", Port: 443, Expect: ExpectAllow}}},
		{"IDN to punycode", "checks: [{name: idn, host: bücher.example, port: 443, expect: allow}]",
			[]Check{{Name: "idn", Host: "xn--bcher-kva.example", Port: 443, Expect: ExpectAllow}}},
		{"IP literals, IPv6 bracketed", "checks: [{name: v4, host: 203.0.113.7, port: 443, expect: deny, reason: ip-literal}, {name: v6, host: '[2001:db8::1]', port: 443, expect: deny}]",
			[]Check{{Name: "v4", Host: "203.0.113.7", Port: 443, Expect: ExpectDeny, Reason: "ip-literal"},
				{Name: "v6", Host: "2001:db8::1", Port: 443, Expect: ExpectDeny}}},
		{"underscore label, port bounds", "checks: [{name: srv, host: _srv._tcp.example.com, port: 1, expect: allow}, {name: hi, host: a.example.com, port: 65535, expect: allow}]",
			[]Check{{Name: "srv", Host: "_srv._tcp.example.com", Port: 1, Expect: ExpectAllow},
				{Name: "hi", Host: "a.example.com", Port: 65535, Expect: ExpectAllow}}},
		{"name of 64 characters with every allowed sign", "checks: [{name: " + "a._:/-" + strings.Repeat("x", 58) + ", host: a.example.com, port: 443, expect: allow}]",
			[]Check{{Name: "a._:/-" + strings.Repeat("x", 58), Host: "a.example.com", Port: 443, Expect: ExpectAllow}}},
		{"dns false on an IP", "checks: [{name: a, host: 192.0.2.1, port: 443, expect: deny, dns: false}]",
			[]Check{{Name: "a", Host: "192.0.2.1", Port: 443, Expect: ExpectDeny}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("probes.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	long := strings.Repeat("a", 63) + "."
	cases := []struct {
		name string
		in   string
		is   error
		want []string // substrings of the error
	}{
		{"empty file", "", ErrParse, []string{"empty file"}},
		{"comments only", "# nothing\n", ErrParse, []string{"empty file"}},
		{"a bare list", "- name: a\n  host: a.example.com\n  port: 443\n  expect: allow\n", ErrParse, []string{"a list (put it under checks:)"}},
		{"a scalar", "hello", ErrParse, []string{"a string"}},
		{"not YAML", "checks: [", ErrParse, []string{"probes.yaml"}},
		{"two documents", "checks: []\n---\nchecks: []\n", ErrParse, []string{"more than one YAML document"}},
		{"a second document after an end marker", "checks: [{name: a, host: a.example.com, port: 1, expect: allow}]\n...\nchecks: [{name: b, host: b.example.com, port: 1, expect: allow}]\n", ErrParse, []string{"more than one YAML document"}},
		{"a second document on the marker's line", "checks: [{name: a, host: a.example.com, port: 1, expect: allow}]\n--- {checks: []}\n", ErrParse, []string{"more than one YAML document"}},
		{"no checks", "checks: []\n", ErrInvalid, []string{"none given"}},
		{"unknown top-level key", "checks: [{name: a, host: a.example.com, port: 1, expect: allow}]\ntimeout: 5s\n", ErrParse, []string{`unknown field "timeout"`}},
		{"unknown check key", "checks: [{name: a, host: a.example.com, port: 1, expect: allow, hots: x}]", ErrParse, []string{`unknown field "checks[0].hots"`}},
		{"duplicate key", "checks:\n  - name: a\n    name: b\n    host: a.example.com\n    port: 1\n    expect: allow\n", ErrParse, []string{"name"}},
		{"wrong case key", "checks: [{Name: a, host: a.example.com, port: 1, expect: allow}]", ErrParse, []string{"Name"}},
		{"port as string", "checks: [{name: a, host: a.example.com, port: '443', expect: allow}]", ErrParse, []string{"port"}},
		{"port fractional", "checks: [{name: a, host: a.example.com, port: 443.5, expect: allow}]", ErrParse, []string{"port"}},
		{"port missing", "checks: [{name: a, host: a.example.com, expect: allow}]", ErrInvalid, []string{"checks[0] (\"a\"): port: required"}},
		{"port out of range", "checks: [{name: a, host: a.example.com, port: 70000, expect: allow}]", ErrInvalid, []string{"port: 70000 out of range"}},
		{"port negative", "checks: [{name: a, host: a.example.com, port: -1, expect: allow}]", ErrInvalid, []string{"-1 out of range"}},
		{"name missing", "checks: [{host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"checks[0]: name: required"}},
		{"name with a space", "checks: [{name: 'a b', host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"only letters, digits"}},
		{"name with CRLF (header injection)", "checks: [{name: \"a\\r\\nX-Evil: 1\", host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"only letters, digits"}},
		{"name starting with a sign", "checks: [{name: -a, host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"must start with"}},
		{"name too long", "checks: [{name: " + strings.Repeat("a", 65) + ", host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"longer than 64"}},
		{"reserved name", "checks: [{name: 'control:metadata-ip', host: a.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"reserved"}},
		{"duplicate names", "checks: [{name: a, host: a.example.com, port: 1, expect: allow}, {name: a, host: b.example.com, port: 1, expect: allow}]", ErrInvalid, []string{"checks[1]", "the same as checks[0]"}},
		{"host missing", "checks: [{name: a, port: 1, expect: allow}]", ErrInvalid, []string{"host: required"}},
		{"host with a port", "checks: [{name: a, host: 'a.example.com:443', port: 443, expect: allow}]", ErrInvalid, []string{"host"}},
		{"host too long", "checks: [{name: a, host: " + strings.Repeat(long, 4) + "com, port: 1, expect: allow}]", ErrInvalid, []string{"host"}},
		{"host a wildcard", "checks: [{name: a, host: '*.example.com', port: 1, expect: allow}]", ErrInvalid, []string{"host"}},
		{"host with a space", "checks: [{name: a, host: 'a b.example', port: 1, expect: allow}]", ErrInvalid, []string{"host"}},
		{"expect missing", "checks: [{name: a, host: a.example.com, port: 1}]", ErrInvalid, []string{"expect: required"}},
		{"expect unknown", "checks: [{name: a, host: a.example.com, port: 1, expect: block}]", ErrInvalid, []string{`"block": want allow or deny`}},
		{"expect upper case", "checks: [{name: a, host: a.example.com, port: 1, expect: Allow}]", ErrInvalid, []string{`"Allow"`}},
		{"reason on allow", "checks: [{name: a, host: a.example.com, port: 1, expect: allow, reason: allowed}]", ErrInvalid, []string{"only a check that expects deny"}},
		{"reason malformed", "checks: [{name: a, host: a.example.com, port: 1, expect: deny, reason: Not_Allowlisted}]", ErrInvalid, []string{"lower case words"}},
		{"dns on an IP", "checks: [{name: a, host: 192.0.2.1, port: 1, expect: deny, dns: true}]", ErrInvalid, []string{"IP literal"}},
		{"dns not a bool", "checks: [{name: a, host: a.example.com, port: 1, expect: deny, dns: 'yes'}]", ErrParse, []string{"dns"}},
		{"every problem reported", "checks: [{name: a, host: a.example.com, port: 0, expect: x}, {name: b, port: 1, expect: allow}]", ErrInvalid,
			[]string{"checks[0] (\"a\"): port", "checks[0] (\"a\"): expect", "checks[1] (\"b\"): host"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("probes.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if got != nil {
				t.Errorf("returned checks with an error: %+v", got)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), "probes.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDocumentedExample: the probe file of docs/probe.md parses.
func TestDocumentedExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "probe.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "```yaml\n# probes.yaml")
	if start < 0 {
		t.Fatal("docs/probe.md has no probes.yaml example")
	}
	block := doc[start+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	checks, err := Parse("docs/probe.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 4 || checks[2].Reason != "not-allowlisted" || !checks[0].DNS {
		t.Errorf("example parsed as %+v", checks)
	}
}
