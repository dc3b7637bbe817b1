package probe

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/policy"
)

// Expect is what a check expects egressd to decide.
type Expect string

// Expectations.
const (
	ExpectAllow Expect = "allow"
	ExpectDeny  Expect = "deny"
)

// Check is one entry of a probe file: a host and port, and what egressd
// should decide for them. See docs/probe.md.
type Check struct {
	// Name identifies the check in the table, the JUnit testcase, and
	// egressd's audit record (field probe): 1–64 characters of
	// [A-Za-z0-9._:/-], starting with a letter or digit. The prefix
	// "control:" is reserved for the built-in controls.
	Name string `json:"name"`
	// Host is a host name or an IP literal, normalized on parse.
	Host string `json:"host"`
	// Port is 1–65535.
	Port int `json:"port"`
	// Expect is allow or deny.
	Expect Expect `json:"expect"`
	// Reason, only with expect deny, is the reason egressd must give
	// (X-Egressd-Reason, the EDE text); empty accepts any reason.
	Reason string `json:"reason,omitempty"`
	// DNS also asks egressd's resolver for the host (an A query) when
	// --dns is given; host must then be a name.
	DNS bool `json:"dns,omitempty"`
	// Path, for a host under an inspecting rule, is a request sent inside
	// the tunnel after egressd's 200: a clean absolute path as egressd
	// decides it (policy.CleanPath leaves it unchanged; no query). Empty
	// means the check ends at the CONNECT answer.
	Path string `json:"path,omitempty"`
	// Method, only with Path, is the request's method; empty means GET.
	Method string `json:"method,omitempty"`
	// CA, only with Path, is a PEM file of the CA to trust inside the
	// tunnel (egressd's inspection CA); empty means --inspect-ca.
	CA string `json:"ca,omitempty"`
	// Credential, only with Path and expect allow, is the header egressd
	// must add (a rule's credential, docs/design.md "Credentials"): the
	// request asks the origin, a probe origin (OriginHandler), whether
	// that header arrived, and the check fails unless it says "present".
	// The value is never asked for or shown.
	Credential string `json:"credential,omitempty"`
}

// file is the probe file's shape: a mapping, so that settings can join
// the list later without breaking files.
type file struct {
	Checks []Check `json:"checks"`
}

// controlPrefix starts the names of the built-in controls.
const controlPrefix = "control:"

const maxNameLen = 64

// Parse reads a probe file (YAML, docs/probe.md). origin names the source
// in errors. Decoding is strict: an unknown or duplicate field, a wrong
// type, a second YAML document, or an invalid check is an error naming its
// path ("checks[2].port"). Every problem is reported, joined; on any error
// no check is returned. Hosts come back normalized (policy.NormalizeHost).
func Parse(origin string, data []byte) ([]Check, error) {
	if hasSecondDocument(data) {
		return nil, fmt.Errorf("%w: %s: more than one YAML document; put every check under one checks: list", ErrParse, origin)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrParse, origin, err)
	}
	if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
		return nil, fmt.Errorf("%w: %s: empty file; want a mapping with a checks: list", ErrParse, origin)
	}
	if j = bytes.TrimSpace(j); j[0] != '{' {
		return nil, fmt.Errorf("%w: %s: want a mapping with a checks: list, not %s", ErrParse, origin, jsonKind(j))
	}
	var f file
	strict, err := kjson.UnmarshalStrict(j, &f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrParse, origin, err)
	}
	if err := errors.Join(strict...); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrParse, origin, err)
	}
	if len(f.Checks) == 0 {
		return nil, fmt.Errorf("%w: %s: checks: none given (without -f only the built-in controls run)", ErrInvalid, origin)
	}
	var errs []error
	seen := map[string]int{}
	out := make([]Check, 0, len(f.Checks))
	for i, c := range f.Checks {
		where := fmt.Sprintf("%s: checks[%d]", origin, i)
		if c.Name != "" {
			where += " (" + strconv.Quote(c.Name) + ")"
		}
		n, problems := normalize(c)
		for _, e := range problems {
			errs = append(errs, fmt.Errorf("%s: %w", where, e))
		}
		if len(problems) > 0 {
			continue
		}
		if strings.HasPrefix(n.Name, controlPrefix) {
			errs = append(errs, fmt.Errorf("%s: name: the prefix %q is reserved for the built-in controls: %w", where, controlPrefix, ErrInvalid))
			continue
		}
		if j, dup := seen[n.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name: the same as checks[%d]; names must be unique: %w", where, j, ErrInvalid))
			continue
		}
		seen[n.Name] = i
		out = append(out, n)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// normalize validates one check and returns it with its host normalized,
// or every problem it has.
func normalize(c Check) (Check, []error) {
	var errs []error
	field := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", name, fmt.Sprintf(format, args...), ErrInvalid))
	}
	if err := ValidName(c.Name); err != nil {
		field("name", "%v", err)
	}
	switch {
	case c.Host == "":
		field("host", "required")
	default:
		h, err := policy.NormalizeHost(c.Host)
		if err != nil {
			field("host", "%q: %v", c.Host, err)
			break
		}
		c.Host = h
		if _, err := netip.ParseAddr(h); err == nil && c.DNS {
			field("dns", "%q is an IP literal: there is no name to ask the resolver for", h)
		}
	}
	switch {
	case c.Port == 0:
		field("port", "required (1-65535)")
	case c.Port < 1 || c.Port > 65535:
		field("port", "%d out of range 1-65535", c.Port)
	}
	validRequest(c, field)
	switch c.Expect {
	case ExpectAllow:
		if c.Reason != "" {
			field("reason", "%q: only a check that expects deny names a reason", c.Reason)
		}
	case ExpectDeny:
		if c.Reason != "" && !validReason(c.Reason) {
			field("reason", "%q: a reason is lower case words joined by '-' (not-allowlisted, metadata, …)", c.Reason)
		}
	case "":
		field("expect", "required: allow or deny")
	default:
		field("expect", "%q: want allow or deny", c.Expect)
	}
	return c, errs
}

// validRequest checks path, method and ca (the request sent inside an
// inspected tunnel), reporting each problem to field.
func validRequest(c Check, field func(name, format string, args ...any)) {
	if c.Path == "" {
		if c.Method != "" {
			field("method", "%q: only a check with a path sends a request", c.Method)
		}
		if c.CA != "" {
			field("ca", "%q: only a check with a path looks inside the tunnel", c.CA)
		}
		if c.Credential != "" {
			field("credential", "%q: only a check with a path sends a request", c.Credential)
		}
		return
	}
	if c.Credential != "" {
		if err := policy.CheckCredentialHeader(c.Credential); err != nil {
			field("credential", "%q: %v", c.Credential, err)
		}
		if c.Expect != ExpectAllow {
			field("credential", "%q: only an allowed request gets a credential: expect allow", c.Credential)
		}
	}
	switch p, err := policy.CleanPath(c.Path); {
	case strings.ContainsRune(c.Path, '?'):
		field("path", "%q: no query: egressd decides on the path alone", c.Path)
	case err != nil:
		field("path", "%v", err)
	case p != c.Path:
		field("path", "%q: write it as egressd decides it: %q", c.Path, p)
	}
	if c.Method != "" && !validMethod(c.Method) {
		field("method", "%q: an upper-case method such as GET or POST", c.Method)
	}
}

// validMethod accepts an upper-case token (RFC 9110 §9.1: methods are
// case-sensitive; the registered ones are upper case), CONNECT aside.
func validMethod(m string) bool {
	if len(m) > 32 || m == http.MethodConnect {
		return false
	}
	for i := 0; i < len(m); i++ {
		if (m[i] < 'A' || m[i] > 'Z') && m[i] != '-' && m[i] != '_' {
			return false
		}
	}
	return m != ""
}

// ValidName reports whether name can name a check: it travels in an HTTP
// header and an EDNS0 option and lands in an audit record, so it is short
// and plain.
func ValidName(name string) error {
	if name == "" {
		return errors.New("required")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%q: longer than %d characters", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%q: must start with a letter or digit", name)
		}
		if !alnum && !strings.ContainsRune("._:/-", rune(b)) {
			return fmt.Errorf("%q: only letters, digits and . _ : / - are allowed", name)
		}
	}
	return nil
}

// validReason accepts the shape of policy.Reason values; the set itself
// grows with egressd, so an unknown but well-formed reason simply never
// matches.
func validReason(r string) bool {
	if r == "" || r[0] == '-' || r[len(r)-1] == '-' || len(r) > 64 {
		return false
	}
	for i := 0; i < len(r); i++ {
		if (r[i] < 'a' || r[i] > 'z') && r[i] != '-' {
			return false
		}
	}
	return true
}

// hasSecondDocument reports content after a document marker ("---", or
// "..." that ends a document) that follows content: sigs.k8s.io/yaml reads
// only the first document and would drop the rest without a word.
func hasSecondDocument(data []byte) bool {
	content, ended := false, false
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := bytes.TrimRight(line, "\r")
		if isMarker(l) {
			ended = content
			// "--- {checks: ...}": content on the marker's own line.
			if rest := bytes.TrimSpace(l[3:]); len(rest) > 0 && rest[0] != '#' {
				if ended {
					return true
				}
				content = true
			}
			continue
		}
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			if ended {
				return true
			}
			content = true
		}
	}
	return false
}

// isMarker reports a YAML document marker line (YAML 1.2 §9.1).
func isMarker(l []byte) bool {
	for _, m := range [...]string{"---", "..."} {
		if bytes.HasPrefix(l, []byte(m)) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t') {
			return true
		}
	}
	return false
}

func jsonKind(j []byte) string {
	switch j[0] {
	case '[':
		return "a list (put it under checks:)"
	case '"':
		return "a string"
	default:
		return "a scalar"
	}
}
