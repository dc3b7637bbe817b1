package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/policy"
)

// Revocation (docs/design.md, "Policy"): a change of policy or identity applies
// to open connections too. A tunnel opened under a rule that is gone, by a
// pod that is gone or whose IP now belongs to another pod, or under a
// phase: init rule of a pod that finished initializing would otherwise keep
// carrying bytes for as long as its client keeps it (LLM clients pool
// connections for hours).
//
// Revalidate walks the open tunnels and forwarded requests once per change,
// in a goroutine of its own: the relay never takes a lock for it, and a pass
// costs one identity lookup and one Decide per open connection. Each is
// decided by the steps that admitted it: identify the source, Decide on the
// host and port, the guard on the dialled address, and the TLS or Host check
// on what the client sent first. One that is no longer allowed is closed
// with a reset, and its record carries the new decision (verdict deny, its
// reason) with outcome revoked; in audit mode a denial is softened, the
// connection stays open and its record says would_deny.
//
// Kept-alive client connections between requests hold no decision: the
// next request on them is decided against the snapshot in force then.

// watchedRequest is a plain HTTP request being forwarded, as revocation
// sees it.
type watchedRequest struct {
	ex     *exchange // its decision (the new one once revoked), closed, revoked
	cancel context.CancelFunc
	conn   net.Conn // the client's connection; nil outside a server
}

// Revalidate decides every open tunnel (CONNECT and SNI) and every plain
// HTTP request being forwarded again, against the policy snapshot and the
// identities in force when it runs. Call it after every change of either;
// it returns at once. Calls that come while a pass runs are folded into one
// more pass, so a burst of changes costs at most two.
func (p *Proxy) Revalidate() {
	now := time.Now()
	p.revalAt.Store(&now)
	p.revalPending.Store(true)
	if p.revalRunning.CompareAndSwap(false, true) {
		go p.revalidateLoop()
	}
}

func (p *Proxy) revalidateLoop() {
	for {
		for p.revalPending.Swap(false) {
			start := time.Now()
			checked, revoked := p.revalidate()
			level := slog.LevelDebug
			if revoked > 0 {
				level = slog.LevelInfo
			}
			p.log.Log(context.Background(), level, "proxy: open connections decided again",
				"checked", checked, "revoked", revoked, "duration", time.Since(start).String())
		}
		p.revalRunning.Store(false)
		// A Revalidate between the last Swap and the Store found the loop
		// still running and started none: take its change here.
		if !p.revalPending.Load() || !p.revalRunning.CompareAndSwap(false, true) {
			return
		}
	}
}

// revalidatedSince reports whether Revalidate was called at or after t. A
// connection whose decision began before a change and that registers after
// the pass that followed it is decided again by itself (start,
// watchRequest).
func (p *Proxy) revalidatedSince(t time.Time) bool {
	at := p.revalAt.Load()
	return at != nil && !at.Before(t)
}

// revalidate runs one pass over the open connections and returns how many
// it checked and how many it revoked.
func (p *Proxy) revalidate() (checked, revoked int) {
	snap := p.cfg.Policy()
	p.mu.Lock()
	tunnels := make([]*tunnel, 0, len(p.tunnels))
	for t := range p.tunnels {
		tunnels = append(tunnels, t)
	}
	requests := make([]*watchedRequest, 0, len(p.requests))
	for w := range p.requests {
		requests = append(requests, w)
	}
	p.mu.Unlock()
	for _, t := range tunnels {
		checked++
		if p.recheckTunnel(t, snap) {
			revoked++
		}
	}
	for _, w := range requests {
		checked++
		if p.recheckRequest(w, snap) {
			revoked++
		}
	}
	return checked, revoked
}

// recheckTunnel decides an admitted tunnel again; true when it revoked it.
func (p *Proxy) recheckTunnel(t *tunnel, snap *policy.Snapshot) bool {
	t.mu.Lock()
	if !t.admitted || t.closed {
		t.mu.Unlock()
		return false
	}
	check, hello, head, reqs := t.check, t.hello, t.head, t.reqs
	t.mu.Unlock()
	ex := t.ex // src, host, port and peer are fixed once admitted
	d := p.adm.Redecide(snap, ex.src, ex.host, ex.port, ex.peer)
	switch {
	case hello != nil:
		d, _ = checkHello(d, hello, check)
	case head != nil:
		d, _ = checkPlainHead(d, head, check, ex.port)
	}
	err := ErrRevoked
	if d.Allowed() && !d.WouldDeny {
		// Still allowed, but the tunnel was set up for what its rule
		// asked then: one that cannot give what the rule asks now
		// (inspection, other http entries) is closed, so that the client
		// reconnects under the new rule.
		if why := reqs.Change(snap.Requirements(d)); why != "" {
			d, err = d.Deny(policy.ReasonRuleChanged), fmt.Errorf("%w: %s", ErrRevoked, why)
		}
	}
	if !ex.revoke(d) {
		return false
	}
	t.fail(err)
	t.abort()
	return true
}

// watchRequest registers a plain HTTP request for revocation while it is
// forwarded; cancel ends its upstream request, conn is the client's
// connection (nil when unknown). Revocation puts its new decision in ex
// at once; the returned function unregisters the request and closes ex to
// revocation (forwardedAfter says whether it was revoked): call it in the
// handler's goroutine once forwarding returned, before the record is
// written.
func (p *Proxy) watchRequest(ex *exchange, cancel context.CancelFunc, conn net.Conn) (done func()) {
	w := &watchedRequest{ex: ex, cancel: cancel, conn: conn}
	p.mu.Lock()
	if p.requests == nil {
		p.requests = map[*watchedRequest]struct{}{}
	}
	p.requests[w] = struct{}{}
	p.mu.Unlock()
	if p.revalidatedSince(ex.start) {
		p.recheckRequest(w, p.cfg.Policy())
	}
	return func() {
		p.mu.Lock()
		delete(p.requests, w)
		p.mu.Unlock()
		ex.close()
	}
}

// clientConn is the client connection under a response writer of
// internal/http1; nil for another writer (tests that call a handler
// directly, the stdlib side of BenchmarkPlainHTTP).
func clientConn(w http.ResponseWriter) net.Conn {
	if rw, ok := w.(*http1.ResponseWriter); ok {
		return rw.NetConn()
	}
	return nil
}

// recheckRequest decides a forwarded request again; true when it revoked
// it: its upstream request is cancelled and the client's connection reset
// (whatever the handler still writes reaches nobody).
func (p *Proxy) recheckRequest(w *watchedRequest, snap *policy.Snapshot) bool {
	ex := w.ex
	if !ex.revoke(p.adm.Redecide(snap, ex.src, ex.host, ex.port, ex.dialled())) {
		return false
	}
	w.cancel()
	if w.conn != nil {
		if tc, ok := w.conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = w.conn.Close()
	}
	return true
}
