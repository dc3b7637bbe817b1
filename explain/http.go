package explain

import (
	"errors"
	"net/http"

	"github.com/egressd/egressd/policy"
)

// httpReport is what explain says of one request inside the tunnel
// (--path, --method).
type httpReport struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Inspected: the deciding rule says inspect: true, so the request is
	// decided by its http entries; false: egressd does not see it.
	Inspected bool   `json:"inspected"`
	Note      string `json:"note,omitempty"`
	// Credential is the credential egressd would add to the request
	// (name and header, never its value); nil if none.
	Credential *policy.Credential `json:"credential,omitempty"`
}

// CheckRequest checks Path and Method (--path, --method): a request
// inside a tunnel. An empty Method with a Path becomes GET.
func (o *Options) CheckRequest() error {
	if o.Path == "" && o.Method == "" {
		return nil
	}
	if o.Kind != "connect" && o.Kind != "sni" {
		return errors.New("--path and --method explain a request inside a tunnel: --kind connect or sni")
	}
	if o.Path == "" {
		return errors.New("--method needs --path")
	}
	if o.Method == "" {
		o.Method = http.MethodGet
	}
	return nil
}

// decideRequest decides the request of --path and --method inside the
// tunnel the report allowed, as run does (policy.Snapshot.DecideRequest):
// by the deciding rule's http entries when it inspects; a blind tunnel's
// requests are not seen, so its decision stands.
func (r *Report) decideRequest(o *Options, snap *policy.Snapshot) {
	if o.Path == "" || !r.final.Allowed() {
		return
	}
	r.HTTP = &httpReport{Method: o.Method, Path: o.Path, Inspected: snap.Inspects(r.final)}
	if !r.HTTP.Inspected {
		r.HTTP.Note = "the deciding rule does not inspect: egressd does not see requests inside this tunnel"
		return
	}
	r.final = snap.DecideRequest(r.final, o.Method, o.Path)
	r.HTTP.Credential = r.final.AddsCredential()
}

// writeHTTP prints the request inside the tunnel.
func writeHTTP(p *explainWriter, r *Report) {
	h := r.HTTP
	if h == nil {
		return
	}
	if !h.Inspected {
		p.line("http", "%s %s: %s", h.Method, h.Path, h.Note)
		return
	}
	p.line("http", "%s %s: inspected, decided by the rule's http entries", h.Method, h.Path)
	if c := h.Credential; c != nil {
		p.line("credential", "egressd sets %s to credential %s (%q; the value is never shown)", c.Header, c.Name, c.Format)
	}
}
