package proxy

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// exchange is one request or tunnel from admission to its audit record.
type exchange struct {
	p      *Proxy
	rec    record.Record
	start  time.Time
	src    netip.Addr
	client *policy.Client
	// identified is set once identify has looked src up.
	identified bool
	// dec is the request's one decision, under mu: the zero Decision until
	// admission, then replaced only through fold (policy.Decision.Then).
	// Tunnels, revocation and forwarded requests all hold this one.
	dec policy.Decision
	// peer is the dialled address, under mu: set by the dial step
	// (applyLocked), fixed once a tunnel starts. The record's peer is made
	// from it when the record is.
	peer    netip.AddrPort
	host    string // normalized destination (or raw, when invalid)
	port    int
	written atomic.Bool

	// sent and recv count a plain HTTP exchange's body bytes, read by the
	// interim snapshot while the exchange runs (tunnels count their own).
	sent, recv atomic.Int64
	// idle watches a forwarded response's body (plain HTTP only).
	idle *idleWatch
	// bodyErr is the origin's failure inside its response body; under mu.
	bodyErr error
	// failure is the outcome of a forwarded request's refusal after its
	// allowed decision (route, dial or upstream: errorHandler); under mu.
	failure string

	// live is the forwarded request's own context. The Transport dials on
	// context.WithoutCancel (Go 1.23+), so a dial may outlive the request
	// and its record: dialForTransport copies its results into the
	// exchange under mu, only while live has not ended and the exchange
	// is not closed.
	live context.Context
	mu   sync.Mutex
	// closed: the exchange takes nothing more from revocation or a late
	// dial; set when its tunnel's connections close (tunnel.closeBoth), its
	// forwarding returns (watchRequest) or its record is written (finish).
	// revoked: a revalidation pass cut it (revoke). Both under mu.
	closed, revoked bool
}

// newExchange starts the exchange of a request or tunnel from src (the
// connection's admit.SourceAddr): its id and start are set now, at
// admission, so that interim records and the end record share them.
func (p *Proxy) newExchange(kind string, src netip.Addr) *exchange {
	ex := &exchange{p: p, start: time.Now(), src: src}
	ex.rec.ID = audit.NewID()
	ex.rec.Start = ex.start
	ex.rec.Kind = kind
	ex.rec.Mode = string(p.cfg.Mode)
	return ex
}

// identify is the one source IP → pod step of every listener: it looks the
// exchange's source up once (admit.Pipeline.Identify) and fills the record's client (the pod's
// identity, or the bare IP of an unknown source). It returns nil for an
// unknown source.
func (p *Proxy) identify(ex *exchange) *policy.Client {
	if !ex.identified {
		ex.identified = true
		ex.client = p.adm.Identify(ex.src)
		ex.rec.Client = audit.ClientOf(ex.src, ex.client)
	}
	return ex.client
}

// noDecision is the decision of an exchange that ended before any step
// decided: its request never named a destination.
var noDecision = policy.Denied(policy.ReasonBadRequest)

// decision is the decision in force.
func (ex *exchange) decision() policy.Decision {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.decisionLocked()
}

func (ex *exchange) decisionLocked() policy.Decision {
	if ex.dec.Verdict == "" {
		return noDecision
	}
	return ex.dec
}

// fold folds the decision of a later step (admission, guard, TLS or Host
// check, a refusal, revocation) into the one in force and returns the
// result: policy.Decision.Then, the one place of "keep the first reason
// enforce would give".
func (ex *exchange) fold(next policy.Decision) policy.Decision {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.foldLocked(next)
}

func (ex *exchange) foldLocked(next policy.Decision) policy.Decision {
	ex.dec = ex.dec.Then(next)
	return ex.dec
}

// applyLocked puts what routeAndDial found into the exchange: its
// decision, the lookup's answer and the dialled peer (a failure comes back
// as the result's refusal). ex.mu is held.
func (ex *exchange) applyLocked(h *dialResult) {
	ex.foldLocked(h.route.Decision)
	if h.route.Looked {
		ex.setDNS(h.route.Answer)
	}
	if h.peer.IsValid() {
		ex.peer = h.peer
	}
}

// dialled is the dialled address; the zero AddrPort before a dial
// connected.
func (ex *exchange) dialled() netip.AddrPort {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.peer
}

// peerText is the record's peer of the dialled address p.
func peerText(p netip.AddrPort) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// close ends the exchange for revocation and late dials (closed).
func (ex *exchange) close() {
	ex.mu.Lock()
	ex.closed = true
	ex.mu.Unlock()
}

// revoke folds a revalidation pass's new decision d into the exchange:
// true when enforce mode ends the exchange now, which is then revoked. In
// audit mode a denial keeps it open and its record says would_deny
// (unless it says so already: policy.Decision.Then keeps the first
// reason). A closed or revoked exchange takes nothing.
func (ex *exchange) revoke(d policy.Decision) bool {
	if d.Allowed() && !d.WouldDeny {
		return false
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || ex.revoked {
		return false
	}
	ex.foldLocked(d)
	if d.Allowed() {
		return false
	}
	ex.revoked = true
	return true
}

// isRevoked reports whether a revalidation pass revoked the exchange.
func (ex *exchange) isRevoked() bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.revoked
}

// who names the client in a refusal body.
func (ex *exchange) who() string {
	if ex.client != nil {
		return ex.client.Namespace + "/" + ex.client.Pod
	}
	return "unknown client " + ex.src.String()
}

// upstreamErr returns the origin's failure inside its response body.
func (ex *exchange) upstreamErr() error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.bodyErr
}

// upstreamBroken reports whether the response must be cut, not completed:
// the origin failed inside its body or the body idled out.
func (ex *exchange) upstreamBroken() bool {
	return ex.upstreamErr() != nil || ex.idle != nil && ex.idle.fired.Load()
}

// setStatus records the HTTP status answered; under mu, since an interim
// snapshot may read the record meanwhile.
func (ex *exchange) setStatus(status int) {
	ex.mu.Lock()
	ex.rec.HTTP = httpOf(ex.rec.HTTP, status)
	ex.mu.Unlock()
}

// setError records err (redacted) unless an error is recorded already.
func (ex *exchange) setError(err string) {
	ex.mu.Lock()
	if ex.rec.Error == "" {
		ex.rec.Error = audit.RedactText(err)
	}
	ex.mu.Unlock()
}

// snapshot is the record as it stands, for an interim record: a copy, with
// the bytes so far and the decision in force.
func (ex *exchange) snapshot() record.Record {
	ex.mu.Lock()
	r := ex.rec
	dec := ex.decisionLocked()
	r.Peer = peerText(ex.peer)
	if r.HTTP != nil {
		h := *r.HTTP
		r.HTTP = &h
	}
	ex.mu.Unlock()
	r.Host, r.Port = ex.host, ex.port
	r.SetDecision(dec)
	r.BytesSent, r.BytesReceived = ex.sent.Load(), ex.recv.Load()
	r.DurationMS = float64(time.Since(ex.start).Microseconds()) / 1000
	return r
}

// setDNS copies what the record shows of a lookup.
func (ex *exchange) setDNS(a resolver.Answer) {
	d := &record.DNS{
		Answers:  make([]string, 0, len(a.Addrs)),
		CNAMEs:   a.CNAMEs,
		TTL:      a.TTL,
		Rcode:    resolver.RcodeString(a.Rcode),
		MS:       float64(a.Duration.Microseconds()) / 1000,
		Cached:   a.Cached,
		Stale:    a.Stale,
		Upstream: a.Upstream,
	}
	for _, ip := range a.Addrs {
		d.Answers = append(d.Answers, ip.String())
	}
	ex.rec.DNS = d
}

// finish writes the record exactly once: the decision, the outcome (of
// the decision and after, what happened once decided: record.OutcomeOf),
// the end state and the counters. err, when not nil, goes in redacted.
func (ex *exchange) finish(after string, err error) {
	if !ex.written.CompareAndSwap(false, true) {
		return
	}
	ex.mu.Lock() // after a late dial's copy, if any; none comes after
	ex.closed = true
	dec, peer := ex.decisionLocked(), ex.peer
	ex.mu.Unlock()
	r := &ex.rec
	if !ex.identified {
		ex.p.identify(ex)
	}
	r.Host, r.Port = ex.host, ex.port
	r.Peer = peerText(peer)
	r.SetDecision(dec)
	r.Outcome = record.OutcomeOf(dec, after)
	if err != nil && r.Error == "" {
		r.Error = audit.RedactText(err.Error())
	}
	r.DurationMS = float64(time.Since(ex.start).Microseconds()) / 1000
	mc := ex.p.mc
	mc.countRequest(r)
	if r.BytesSent > 0 {
		mc.sent.Add(float64(r.BytesSent))
	}
	if r.BytesReceived > 0 {
		mc.received.Add(float64(r.BytesReceived))
	}
	ex.p.cfg.Audit.Write(r)
}

// afterOf is what an exchange's error says happened once it was decided:
// a refusal's failure (route, dial, upstream, the drain), the idle
// timeout, the drain cut; "" for none of them.
func afterOf(err error) string {
	if rf, ok := errors.AsType[*refusal](err); ok {
		return rf.after
	}
	switch {
	case errors.Is(err, ErrIdle):
		return record.OutcomeIdleTimeout
	case errors.Is(err, ErrCut):
		return record.OutcomeDrained
	}
	return ""
}
