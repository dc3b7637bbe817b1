package policy

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Credentials (docs/design.md "Credentials", issue 28): an inspected rule
// may have egressd set a header holding a credential it holds, so that the
// pod never holds the key. policy only names the credential and says when
// it is added; the value lives in package credentials.

// Credential is a rule's credential field: which credential egressd adds,
// in which header, in which form.
type Credential struct {
	// Name is the credential's name: the name of its file in
	// --credentials-dir (a key of a Kubernetes Secret: letters, digits,
	// '-', '_' and '.'). Required.
	Name string `json:"name"`
	// Header is the field egressd sets, replacing any value the client
	// sent; empty means Authorization. A compiled Credential holds it in
	// canonical form (textproto.CanonicalMIMEHeaderKey).
	Header string `json:"header,omitempty"`
	// Format is the header's value with "{}" where the credential's value
	// goes, exactly once, and no other brace; empty means "Bearer {}".
	Format string `json:"format,omitempty"`
}

// Defaults of Credential.Header and Credential.Format.
const (
	DefaultCredentialHeader = "Authorization"
	DefaultCredentialFormat = "Bearer {}"
)

// Placeholder is where a Credential.Format puts the value.
const Placeholder = "{}"

// Split returns c.Format (defaults applied) around its placeholder: the
// header's value is prefix + value + suffix.
func (c *Credential) Split() (prefix, suffix string) {
	f := c.Format
	if f == "" {
		f = DefaultCredentialFormat
	}
	prefix, suffix, _ = strings.Cut(f, Placeholder)
	return prefix, suffix
}

// withDefaults returns a copy of c with the defaults applied and the
// header in canonical form, or nil for nil.
func (c *Credential) withDefaults() *Credential {
	if c == nil {
		return nil
	}
	n := *c
	if n.Header == "" {
		n.Header = DefaultCredentialHeader
	}
	n.Header = textproto.CanonicalMIMEHeaderKey(n.Header)
	if n.Format == "" {
		n.Format = DefaultCredentialFormat
	}
	return &n
}

// AddsCredential returns the credential to add to the request d decided:
// the deciding rule's, when d allows outright a request of an inspected
// rule. A denial, an allow that audit mode softened (would_deny: a request
// the rule denies) and a decision of a rule without credential add none.
func (d Decision) AddsCredential() *Credential {
	if d.Verdict != Allow || d.WouldDeny || !d.Inspect {
		return nil
	}
	return d.Credential
}

// Credentials returns the distinct credentials (defaults applied) the
// snapshot's rules name, in order of precedence: for `egressd check
// --credentials-dir`, which warns on those not available.
func (s *Snapshot) Credentials() []Credential {
	if s == nil {
		return nil
	}
	var out []Credential
	seen := map[Credential]bool{}
	for i := range s.rules {
		if c := s.rules[i].credential; c != nil && !seen[*c] {
			seen[*c] = true
			out = append(out, *c)
		}
	}
	return out
}

// credential validates a rule's credential field.
func (v *validator) credential(field string, r *EgressRule) {
	c := r.Credential
	if c == nil {
		return
	}
	if !r.Inspect {
		v.add(field+".credential", "", errors.New("a credential needs inspect: true (egressd adds it to requests it decides inside the tunnel)"))
	}
	for i, h := range r.Hosts {
		if strings.Contains(h, "*") {
			v.add(fmt.Sprintf("%s.hosts[%d]", field, i), h,
				errors.New("a rule with a credential names its hosts exactly, without wildcards (a key goes only to names the policy spells out)"))
		}
	}
	field += ".credential"
	if err := CheckCredentialName(c.Name); err != nil {
		v.add(field+".name", c.Name, err)
	}
	if c.Header != "" {
		if err := CheckCredentialHeader(c.Header); err != nil {
			v.add(field+".header", c.Header, err)
		}
	}
	if c.Format != "" {
		if err := CheckCredentialFormat(c.Format); err != nil {
			v.add(field+".format", c.Format, err)
		}
	}
}

// CheckCredentialName accepts a credential name: the key of a Kubernetes
// Secret (letters, digits, '-', '_', '.'; at most 253; not "." or "..",
// not starting with "..", which the Secret volume's own entries use).
func CheckCredentialName(name string) error {
	if name == "" {
		return errors.New("required: the name of a file in --credentials-dir (a key of the Secret)")
	}
	if msgs := validation.IsConfigMapKey(name); len(msgs) > 0 {
		return fmt.Errorf("a credential name is a Secret key: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// CheckCredentialHeader accepts the name of the field a credential goes
// in: an RFC 9110 §5.1 field name (a token) that is not one egressd owns:
// Host, Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade,
// Content-Length, Expect, Proxy-*, X-Egressd-* and Egressd-* (framing,
// routing and egressd's own fields: a credential there would change what
// the request is, not who sends it).
func CheckCredentialHeader(name string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !isTchar(name[i]) {
			return errors.New("not a header field name: letters, digits and !#$%&'*+-.^_`|~ only (RFC 9110 §5.1)")
		}
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	switch canon {
	case "Host", "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Expect":
		return errors.New("a field egressd owns (framing and routing): name the header the API reads its key from, such as Authorization or X-Api-Key")
	}
	for _, p := range [...]string{"Proxy-", "X-Egressd-", "Egressd-"} {
		if strings.HasPrefix(canon, p) {
			return fmt.Errorf("a field egressd owns (%s*): name the header the API reads its key from, such as Authorization or X-Api-Key", p)
		}
	}
	return nil
}

// isTchar reports whether c is an RFC 9110 §5.6.2 tchar.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckCredentialFormat accepts a credential's format: "{}" exactly once
// and no other brace (so that a later escape syntax stays free), and
// otherwise visible ASCII, spaces and tabs, with no space or tab at either
// end (a field value's ends are trimmed, RFC 9110 §5.5: "{} " would not
// mean what it says). Non-ASCII is refused: APIs expect their key fields
// in ASCII.
func CheckCredentialFormat(f string) error {
	if strings.Count(f, Placeholder) != 1 {
		return errors.New(`the format holds "{}" exactly once, where the credential's value goes ("Bearer {}", "{}")`)
	}
	if strings.Count(f, "{") != 1 || strings.Count(f, "}") != 1 {
		return errors.New(`no brace but the one "{}" of the value`)
	}
	if strings.Trim(f, " \t") != f {
		return errors.New("no space or tab at either end (HTTP trims them from a field's value)")
	}
	for i := 0; i < len(f); i++ {
		if c := f[i]; c != '\t' && (c < ' ' || c > '~') {
			return errors.New("visible ASCII, spaces and tabs only (no control character, no line break, no non-ASCII)")
		}
	}
	return nil
}
