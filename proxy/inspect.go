package proxy

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// inspects reports whether the tunnel is handed to the inspection engine:
// an engine is configured and the deciding rule's requirements (reqs, of
// the snapshot that decided) say inspect (docs/design.md, "Inspection"). A
// tunnel of a blind rule paid one field check of its decision, no lookup
// (policy.Snapshot.Requirements).
func (t *tunnel) inspects(reqs policy.Requirements) bool {
	return t.p.cfg.Inspect != nil && reqs.Inspect
}

// serveInspected hands the tunnel, its ClientHello checked (t.replay holds
// the bytes read from the client so far, replayed), to the inspection engine
// instead of the relay, and keeps what the engine says of it for the
// tunnel's record. Closing the tunnel's connections (revocation, the drain
// cut) ends the engine.
func (t *tunnel) serveInspected() {
	ex := t.ex
	client := &countingConn{Conn: t.client, t: t, pre: t.replay}
	t.replay = nil
	tun, err := inspect.Serve(t.p.cutCtx, t.p.cfg.Inspect, inspect.Args[policy.Decision]{
		Client: client, Upstream: t.upstream,
		Host: ex.host, Port: ex.port,
		Decide: t.decideRequest, Record: t.recordExchange,
		Established: t.established, Requests: &t.inspReqs,
	})
	t.mu.Lock()
	t.inspected = &tun // its outcome is the tunnel's (afterLocked)
	t.mu.Unlock()
	if tun.Outcome == inspect.OutcomeUpstreamTLSFailed {
		ex.setError("upstream TLS: " + tun.VerifyError)
	}
	if err != nil && !t.closedByUs() {
		t.fail(err)
	}
}

// established keeps what the engine says of the tunnel once both
// handshakes completed, so that interim records carry tls.inspected and
// tls.origin_cert before the tunnel ends (requests: t.inspReqs).
func (t *tunnel) established(tun inspect.Tunnel) {
	t.mu.Lock()
	t.inspected = &tun
	t.mu.Unlock()
}

// closedByUs reports whether the tunnel's connections were closed by
// egressd (revocation, the drain cut): the engine's error then only says
// that its connection went away.
func (t *tunnel) closedByUs() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed || t.ex.isRevoked()
}

// decideRequest decides one request inside an inspected tunnel by the one
// decision of its tunnel: the tunnel's decision in force, made again
// against the current snapshot when a reload replaced the one it was made
// on (so that the rule index names a rule of the snapshot that decides the
// request), then host-mismatch through Decision.Deny (audit mode softens
// it, as on the plain-HTTP path), else Snapshot.DecideRequest.
func (t *tunnel) decideRequest(r inspect.Request) inspect.Verdict[policy.Decision] {
	snap := t.p.cfg.Policy()
	d := t.tunnelDecision(snap)
	if r.HostMismatch {
		d = d.Deny(policy.ReasonHostMismatch)
	} else {
		d = snap.DecideRequest(d, r.Method, r.Target)
	}
	c := d.AddsCredential()
	if c == nil {
		return inspect.Verdict[policy.Decision]{Allow: d.Allowed(), Reason: string(d.Reason), Decision: d}
	}
	// The rule adds a credential: sent with it, or not at all (fail
	// closed, in every mode: ReasonCredentialUnavailable is Never).
	var (
		v  []string
		ok bool
	)
	if t.p.cfg.Credentials != nil {
		v, ok = t.p.cfg.Credentials.Lookup(c.Name, c.Format)
	}
	if !ok {
		d = d.Deny(policy.ReasonCredentialUnavailable)
		return inspect.Verdict[policy.Decision]{Reason: string(d.Reason), Decision: d, Status: http.StatusServiceUnavailable}
	}
	return inspect.Verdict[policy.Decision]{Allow: true, Reason: string(d.Reason), Decision: d, SetHeader: c.Header, SetValue: v}
}

// tunnelDecision is the tunnel's decision for a request decided against
// snap. t.inspSnap and t.inspDec cache it per snapshot (HTTP/2 decides
// streams concurrently: under t.mu).
func (t *tunnel) tunnelDecision(snap *policy.Snapshot) policy.Decision {
	t.mu.Lock()
	cached, d := t.inspSnap, t.inspDec
	t.mu.Unlock()
	if cached == snap {
		return t.ex.decision().Then(d)
	}
	ex := t.ex // src, host, port and peer are fixed once admitted
	d = t.p.adm.Redecide(snap, ex.src, ex.host, ex.port, ex.peer)
	t.mu.Lock()
	t.inspSnap, t.inspDec = snap, d
	t.mu.Unlock()
	return ex.decision().Then(d)
}

// recordExchange writes the record of one HTTP exchange inside the tunnel
// (kind inspected, tunnel = the tunnel's id). The engine puts no header
// value, body or query in an ExchangeRecord; the error is redacted as every
// other.
func (t *tunnel) recordExchange(x inspect.ExchangeRecord[policy.Decision]) {
	ex := t.ex
	r := record.Record{
		ID: audit.NewID(), Start: x.Start, Kind: record.KindInspected, Tunnel: ex.rec.ID,
		Client: ex.rec.Client, Host: ex.host, Port: ex.port, Mode: ex.rec.Mode, Peer: peerText(ex.peer),
		Probe: ex.rec.Probe, // an exchange in egressd probe's tunnel is the probe's
		HTTP: &record.HTTP{Method: x.Method, Path: x.Path, Status: x.Status,
			RedirectHost: x.RedirectHost, RedirectAmbiguous: x.RedirectAmbiguous, Proto: x.Proto},
		BytesSent: x.BytesReceived, BytesReceived: x.BytesSent,
		DurationMS: float64(x.Duration.Microseconds()) / 1000,
	}
	d := x.Verdict.Decision
	if d.Verdict == "" {
		// A request the engine refused before it could be decided (a head
		// that does not parse): refused in every mode.
		d = policy.Denied(policy.Reason(x.Verdict.Reason))
	}
	r.SetDecision(d)
	if c := d.Credential; c != nil && (d.AddsCredential() != nil || d.Reason == policy.ReasonCredentialUnavailable) {
		r.HTTP.Credential, r.HTTP.CredentialReplaced = c.Name, x.Replaced
	}
	after := ""
	switch {
	case x.Idle:
		after = record.OutcomeIdleTimeout
	case x.Error != "":
		after = record.OutcomeUpstreamError
	}
	r.Outcome = record.OutcomeOf(d, after)
	if x.Error != "" {
		r.Error = audit.RedactText(x.Error)
	}
	if x.HeadTooLarge {
		t.p.m.ResponseHeadsTooLarge.WithLabelValues(record.KindInspected).Inc()
	}
	t.p.mc.countRequest(&r)
	t.p.cfg.Audit.Write(&r)
}

// inspectedTLSLocked adds what the engine says of the tunnel to its
// record's tls, and the request count. t.mu is held.
func (t *tunnel) inspectedTLSLocked(tl *record.TLS) {
	in := t.inspected
	if in == nil || !in.Inspected {
		return
	}
	tl.Inspected, tl.ALPN, tl.Result = true, in.ALPN, "established"
	tl.OriginCert = &record.OriginCert{Subject: in.Origin.Subject, Issuer: in.Origin.Issuer, NotAfter: in.Origin.NotAfter}
}

// errNotTLSInspected refuses a tunnel of an inspecting rule whose client
// does not speak TLS first: egressd cannot see inside what it cannot
// terminate, and relaying it blind would pass by the rule's http entries.
var errNotTLSInspected = errors.New("proxy: the tunnel's rule inspects, and the client's first message is not a TLS ClientHello")

// countingConn is an inspected tunnel's client connection as the engine
// sees it: the bytes already read (the ClientHello) replayed first, every
// byte counted into the tunnel's record and its idle clock.
type countingConn struct {
	net.Conn
	t   *tunnel
	pre []byte
}

func (c *countingConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		c.count(&c.t.sent, n)
		return n, nil
	}
	n, err := c.Conn.Read(b)
	c.count(&c.t.sent, n)
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.count(&c.t.recv, n)
	return n, err
}

func (c *countingConn) count(n *atomic.Int64, k int) {
	if k > 0 {
		n.Add(int64(k))
		c.t.last.Store(time.Now().UnixNano())
	}
}
