package proxy

import (
	"net/http"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/policy"
)

// admit is the admission step of every listener: identify, then the
// pipeline's Admit (audit availability, NormalizeHost, the port, Decide;
// admit.Pipeline.Admit has the order). The exchange keeps the host and the
// decision; a denial comes back as its refusal.
func (p *Proxy) admit(ex *exchange, rawHost string, port int) *refusal {
	ex.port = port
	a := p.adm.Admit(admit.Request{Client: p.identify(ex), Host: rawHost, Port: port})
	ex.host = a.Host
	d := ex.fold(a.Decision)
	if d.Allowed() {
		return nil
	}
	return deny(refusalStatus(d.Reason), d, a.Err)
}

// refusalStatus is the HTTP status of a denial: 503 while records cannot
// be written, 400 for a request that names no valid destination, 403 for
// a policy or guard denial (never 407: see writeRefusal).
func refusalStatus(r policy.Reason) int {
	switch r {
	case policy.ReasonAuditUnavailable:
		return http.StatusServiceUnavailable
	case policy.ReasonInvalidHost, policy.ReasonBadRequest:
		return http.StatusBadRequest
	}
	return http.StatusForbidden
}
