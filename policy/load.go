package policy

import "errors"

// Source is one file (or stream) of policy documents: its name, as errors
// and Document.Origin show it, and its bytes.
type Source struct {
	Name string
	Data []byte
}

// Load is the one loader of a policy set: it parses every source, then
// validates and compiles the whole set (CompileWith), so that what it
// accepts is exactly what a running egressd enforces. `egressd check`,
// `run` (at start and on every reload), `explain` and suggest's self-check
// call it; the Kubernetes controller, whose documents are already
// decoded, calls CompileWith, the same validation and compilation.
//
// Every problem of every source is reported, joined; on any error no
// snapshot is returned.
func Load(srcs []Source, opts ValidateOptions) (*Snapshot, error) {
	var (
		docs []Document
		errs []error
	)
	for _, s := range srcs {
		d, err := Parse(s.Name, s.Data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, d...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return CompileWith(docs, opts)
}
