package policy

// This file holds the signatures other packages code against while the
// policy package is being written. The policy helper replaces it with real
// files (parse.go, host.go, pattern.go, compile.go, lint.go) and deletes it.

// Parse reads a multi-document YAML stream of EgressPolicy objects (or a
// List of them). origin names the source in errors and in Document.Origin.
// It checks syntax and kind only; Validate checks the content.
func Parse(origin string, data []byte) ([]Document, error) { return nil, nil }

// Validate checks one document against the contract. The error names the
// origin, field and value, and joins every problem found.
func Validate(doc Document) error { return nil }

// Compile validates every document and builds an immutable snapshot. Any
// invalid document makes the whole compile fail (callers keep the previous
// snapshot in force).
func Compile(docs []Document) (*Snapshot, error) { return &Snapshot{}, nil }

// Snapshot is a compiled, immutable set of policies, safe for concurrent use.
// The zero value and nil deny everything.
type Snapshot struct{}

// Decide returns the decision for a request. It costs O(labels of the host)
// and does not allocate.
func (s *Snapshot) Decide(a DecideArgs) Decision { return Denied(ReasonNotAllowlisted) }

// Policies returns the documents the snapshot was compiled from.
func (s *Snapshot) Policies() []Document { return nil }

// NormalizeHost lower-cases, removes one trailing dot, converts IDNA to
// punycode and checks labels and length. An IP literal (also bracketed
// IPv6) is returned in netip canonical form.
func NormalizeHost(raw string) (string, error) { return raw, nil }

// Warning is one lint finding of Lint.
type Warning struct {
	Origin  string
	Message string
}

// Lint returns warnings for valid documents: patterns under a private public
// suffix, duplicate and shadowed rules, and (when pods is not nil) policies
// that select none of the given clients.
func Lint(docs []Document, pods []*Client) []Warning { return nil }
