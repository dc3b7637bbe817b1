package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/policy"
)

// refusal is why a request gets no connection: a denial (403, 400, 503)
// or an upstream failure (502/504). reason is what X-Egressd-Reason says:
// the decision's reason for a denial, the outcome for an upstream failure
// (resolve-failed, dial-failed, dial-timeout, upstream-error); the record's
// reason is always the decision's. after is the outcome of a failure
// after an allowed decision, the same words as reason (or drained, for a
// dial the drain deadline ended); "" for a denial.
type refusal struct {
	status int
	reason string
	after  string
	err    error
}

// deny is the refusal of a denied decision.
func deny(status int, d policy.Decision, err error) *refusal {
	return &refusal{status: status, reason: string(d.Reason), err: err}
}

// failure is the refusal of a failure after an allowed decision (the
// decision stays as it is): X-Egressd-Reason names the outcome.
func failure(status int, outcome string, err error) *refusal {
	return &refusal{status: status, reason: outcome, after: outcome, err: err}
}

func (r *refusal) Error() string {
	if r.err != nil {
		return fmt.Sprintf("%s: %v", r.reason, r.err)
	}
	return r.reason
}

func (r *refusal) Unwrap() error { return r.err }

// writeRefusal answers a refused request: the status, X-Egressd-Reason and a
// one-line body naming host, pod and reason. Never 407: a policy denial is
// not an authentication problem, and clients would retry with credentials.
func writeRefusal(w http.ResponseWriter, ex *exchange, rf *refusal) {
	body := refusalBody(ex, rf)
	h := w.Header()
	http1.SetRefusal(w, rf.reason)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rf.status)
	_, _ = io.WriteString(w, body)
	ex.setStatus(rf.status)
}

// refusalBody is the one-line body of a refusal.
func refusalBody(ex *exchange, rf *refusal) string {
	verb := "denied"
	if rf.status >= 500 {
		verb = "failed"
	}
	return "egressd: " + verb + " " + net.JoinHostPort(ex.host, strconv.Itoa(ex.port)) + " for " + ex.who() + ": " + rf.reason + "\n"
}

// appendRefusal appends a whole refusal response (for connections that
// close after it: CONNECT, refused heads, connections over the limit).
func appendRefusal(b []byte, ex *exchange, rf *refusal) []byte {
	b = http1.AppendRefusal(b, rf.status, rf.reason, refusalBody(ex, rf), true)
	ex.setStatus(rf.status)
	return b
}
