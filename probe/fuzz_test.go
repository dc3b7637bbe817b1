package probe

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/policy"
)

// FuzzParse feeds probe files to the parser. Whatever the input: no panic;
// an error is ErrParse or ErrInvalid; an accepted file holds only valid,
// normalized checks, and writing them back out parses to the same checks.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"checks:\n  - name: models\n    host: models.example.com\n    port: 443\n    expect: allow\n    dns: true\n",
		"checks: [{name: a, host: 203.0.113.7, port: 80, expect: deny, reason: ip-literal}]",
		"checks: [{name: a, host: '[::1]', port: 1, expect: deny}]",
		"checks: [{name: idn, host: bücher.example., port: 443, expect: allow}]",
		"checks: [{name: a, name: b}]",
		"---\nchecks: []\n---\n",
		"- a\n- b\n",
		"checks: [{name: \"a\\r\\nX: y\", host: a, port: 1, expect: allow}]",
		"checks: [{name: control:x, host: a.example.com, port: 65536, expect: maybe}]",
		"checks: &a [*a]",
		"checks: [{name: p, host: api.example.com, port: 443, expect: deny, reason: path-not-allowed, path: /v1/files, method: POST, ca: ca.pem}]",
		"checks: [{name: p, host: api.example.com, port: 443, expect: allow, path: '/v1/%2e%2e/x?q'}]",
		"checks: [{name: p, host: api.example.com, port: 443, expect: allow, method: GET}]",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checks, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrParse) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error is neither ErrParse nor ErrInvalid: %v", err)
			}
			if checks != nil {
				t.Fatal("checks returned with an error")
			}
			return
		}
		if len(checks) == 0 {
			t.Fatal("accepted a file without checks")
		}
		names := map[string]bool{}
		for _, c := range checks {
			if ValidName(c.Name) != nil || strings.HasPrefix(c.Name, controlPrefix) || names[c.Name] {
				t.Fatalf("bad or duplicate name accepted: %q", c.Name)
			}
			names[c.Name] = true
			if h, err := policy.NormalizeHost(c.Host); err != nil || h != c.Host {
				t.Fatalf("host %q not normalized (%q, %v)", c.Host, h, err)
			}
			if c.Port < 1 || c.Port > 65535 {
				t.Fatalf("port %d accepted", c.Port)
			}
			if c.Expect != ExpectAllow && c.Expect != ExpectDeny || c.Expect == ExpectAllow && c.Reason != "" {
				t.Fatalf("expect %q reason %q accepted", c.Expect, c.Reason)
			}
			if c.Path == "" && (c.Method != "" || c.CA != "") {
				t.Fatalf("method %q or ca %q accepted without a path", c.Method, c.CA)
			}
			if p, err := policy.CleanPath(c.Path); c.Path != "" && (err != nil || p != c.Path || strings.Contains(c.Path, "?")) {
				t.Fatalf("path %q accepted: clean %q, %v", c.Path, p, err)
			}
			if c.Method != "" && !validMethod(c.Method) {
				t.Fatalf("method %q accepted", c.Method)
			}
			if _, ip := parseIP(c.Host); ip && c.DNS {
				t.Fatalf("dns on IP %q accepted", c.Host)
			}
		}
		out, err := yaml.Marshal(file{Checks: checks})
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse("again.yaml", out)
		if err != nil {
			t.Fatalf("written back, the checks do not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, checks) {
			t.Fatalf("round trip changed the checks:\n%+v\n%+v", checks, again)
		}
	})
}
