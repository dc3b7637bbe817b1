package policy

import "errors"

// Sentinel errors, matched with errors.Is through any wrapping.
var (
	// ErrParse marks a document that is not YAML, not an object, of the
	// wrong apiVersion or kind, or that has unknown or duplicate fields.
	ErrParse = errors.New("policy: cannot parse")
	// ErrInvalid marks a document whose content breaks the contract
	// (docs/design.md "Policy: EgressPolicy"). Each problem is a *FieldError.
	ErrInvalid = errors.New("policy: invalid")
	// ErrInvalidHost marks a name NormalizeHost refuses.
	ErrInvalidHost = errors.New("invalid host name")
	// ErrInvalidPattern marks a host pattern ParsePattern refuses.
	ErrInvalidPattern = errors.New("invalid host pattern")
	// ErrDuplicatePolicy marks two documents with the same namespace/name.
	ErrDuplicatePolicy = errors.New("policy: duplicate policy")
)

// FieldError is one problem of one document: where (origin and field path)
// and what (the offending value and the cause). Validate and Compile return
// them joined; errors.As finds the first.
type FieldError struct {
	Origin string // "policies/llm.yaml: document 2 (llm-prod/llm-bootstrap)"
	// Where is "file:line:column" of the field when the document was read
	// from a file; empty otherwise (Origin says where).
	Where string
	Field string // "spec.egress[1].hosts[0]"
	Value string // the offending value, as written
	Err   error  // the cause; wraps ErrInvalidHost, ErrInvalidPattern, ...
}

// Error reads "llm-prod.yaml:14:13: spec.egress[0].ports[0]: a port is
// 1–65535, got 70000": where, the field path, what is wrong and the value.
func (e *FieldError) Error() string {
	where := e.Origin
	if e.Where != "" {
		where = e.Where
	}
	s := where + ": " + e.Field + ": " + e.Err.Error()
	if e.Value != "" {
		s += ", got " + quote(e.Value)
	}
	return s
}

// Unwrap returns the cause and ErrInvalid, so that errors.Is matches both.
func (e *FieldError) Unwrap() []error { return []error{e.Err, ErrInvalid} }
