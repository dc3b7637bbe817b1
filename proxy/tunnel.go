package proxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/inspect"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
	"github.com/egressd/egressd/record"
)

// tunnel relays one client connection to one upstream connection and writes
// the exchange's record when both directions have ended.
//
// Memory: an idle tunnel holds two goroutines parked in the poller, two
// sockets and this struct. Hello buffers are dropped after the observation
// phase and the relay keeps no buffer of its own on Linux (a pooled buffer
// is taken for each burst and returned after its write).
type tunnel struct {
	p      *Proxy
	ex     *exchange
	client net.Conn

	// mu guards the connections and what Revalidate reads and decides
	// while the tunnel runs. It is never held while bytes move.
	mu       sync.Mutex
	upstream net.Conn
	closed   bool
	// Set by start: from then on revocation decides the tunnel again (the
	// exchange holds its decision and whether a pass revoked it).
	admitted bool
	check    string              // the CONNECT host; "" on the SNI listener
	reqs     policy.Requirements // what the admitting decision's rule asks (set by start)
	// Written under mu by the direction that reads them; read by end, by
	// Revalidate and by interim snapshots.
	notTLS bool
	hello  *sniff.ClientHello
	head   *sniff.HTTPHead
	server *sniff.ServerHello

	errOnce sync.Once
	err     error
	cutting atomic.Bool

	sent, recv atomic.Int64
	last       atomic.Int64 // unix nanoseconds of the last byte moved either way
	pending    atomic.Int32 // directions still running

	active bool // counted in ActiveTunnels
	// upstreamSilent: the upstream ended (EOF or error) before sending a
	// byte. Written by the server side before it ends, read by end.
	upstreamSilent bool
	// inspecting: the deciding rule inspects and an engine is configured
	// (set by start, before the directions run); inspected is what the
	// engine said of the tunnel (under mu); inspSnap and inspDec cache the
	// tunnel's decision per snapshot for its requests (under mu).
	inspecting bool
	replay     []byte // the client's bytes read before the hand-off
	inspected  *inspect.Tunnel
	inspReqs   atomic.Int64 // the engine's request count (inspect.Args.Requests)
	inspSnap   *policy.Snapshot
	inspDec    policy.Decision
	// interimDone unregisters the tunnel from interim records.
	interimDone func()

	// release frees the client's slot of MaxConnsPerClient; nil when the
	// tunnel holds none.
	release func()
}

// newTunnel starts the tunnel of ex (its exchange, made when the connection
// was accepted) over client.
func newTunnel(p *Proxy, client net.Conn, ex *exchange) *tunnel {
	t := &tunnel{p: p, client: client, ex: ex}
	t.touch()
	return t
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// setUpstream attaches the dialled connection; false when the tunnel was cut
// meanwhile (the connection is then closed).
func (t *tunnel) setUpstream(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	t.upstream = c
	return true
}

// fail remembers the first error that ended the tunnel.
func (t *tunnel) fail(err error) {
	if err != nil {
		t.errOnce.Do(func() { t.err = err })
	}
}

// closeBoth closes both connections, which unblocks both directions.
func (t *tunnel) closeBoth() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.ex.close()
	if t.client != nil {
		t.client.Close()
	}
	if t.upstream != nil {
		t.upstream.Close()
	}
	if t.release != nil {
		t.release() // the client's slot frees with its connection
	}
}

// abort closes both connections with a reset (SO_LINGER 0): what the
// kernel still holds for the client is dropped, so a revoked tunnel stops
// at once instead of after its socket buffers drain at the client's pace.
func (t *tunnel) abort() {
	t.mu.Lock()
	for _, c := range []net.Conn{t.client, t.upstream} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	t.mu.Unlock()
	t.closeBoth()
}

// cut ends the tunnel at the drain deadline.
func (t *tunnel) cut() {
	t.cutting.Store(true)
	t.fail(ErrCut)
	t.closeBoth()
}

// start runs the relay: the client side in the calling goroutine when
// inline, else in a new one, and the server side in a new goroutine. pre
// holds bytes already read from the client; hello is the ClientHello
// already parsed from them (SNI listener), nil to peek the client's first
// message (CONNECT); check is the CONNECT host that the SNI or a plaintext
// Host must name. From here on Revalidate decides the tunnel again after
// every change.
func (t *tunnel) start(pre []byte, hello *sniff.ClientHello, check string, inline bool) {
	ex := t.ex
	// What the deciding rule asks of the tunnel (inspection, its http
	// entries), before revocation may decide it again: a later decision
	// that asks otherwise revokes it (recheckTunnel).
	reqs := t.p.cfg.Policy().Requirements(ex.decision())
	t.mu.Lock()
	t.admitted, t.check, t.reqs = true, check, reqs
	t.mu.Unlock()
	if t.p.cfg.Interim != nil {
		t.interimDone = t.p.cfg.Interim.Open(ex.rec.ID, ex.start, t.snapshot)
	}
	// A change that Revalidate announced after this tunnel's decision was
	// made found it not yet admitted: it is decided again here.
	if t.p.revalidatedSince(ex.start) {
		t.p.recheckTunnel(t, t.p.cfg.Policy())
	}
	t.active = true
	t.p.mc.tunnels.Get(t.ex.rec.Kind).Inc()
	if t.inspecting = t.inspects(reqs); t.inspecting {
		// One direction: the client side checks the ClientHello and hands
		// both connections to the inspection engine (inspect.go).
		t.pending.Store(1)
		run := func() {
			t.runDirection(func() {
				if t.clientFirst(pre, hello, check) {
					t.serveInspected()
				}
			})
		}
		if inline {
			run()
			return
		}
		go run()
		return
	}
	t.pending.Store(2)
	go t.runDirection(t.serverSide)
	if inline {
		t.runDirection(func() { t.clientSide(pre, hello, check) })
		return
	}
	go t.runDirection(func() { t.clientSide(pre, hello, check) })
}

// runDirection runs one direction (or, with an empty f, stands for one
// that never started); no panic leaves it: it is logged, the tunnel closed
// and the record still written. The last direction to end writes it.
func (t *tunnel) runDirection(f func()) {
	defer func() {
		if v := recover(); v != nil {
			t.p.log.Error("proxy: panic in tunnel", "panic", v, "host", t.ex.host)
			t.fail(fmt.Errorf("proxy: internal error: %v", v))
			t.closeBoth()
		}
		if t.pending.Add(-1) == 0 {
			t.end()
		}
	}()
	f()
}

// end closes both sides and writes the record; called once, by the last
// direction to finish.
func (t *tunnel) end() {
	t.closeBoth()
	if t.interimDone != nil {
		t.interimDone()
	}
	ex := t.ex
	if t.active {
		t.p.mc.tunnels.Get(ex.rec.Kind).Dec()
	}
	ex.rec.BytesSent, ex.rec.BytesReceived = t.sent.Load(), t.recv.Load()
	t.mu.Lock()
	if tl := t.tlsLocked(); tl != nil {
		ex.rec.TLS = tl
	}
	if t.inspected != nil {
		ex.rec.Requests = t.inspected.Requests
	}
	after := t.afterLocked()
	t.mu.Unlock()
	ex.finish(after, t.err)
	t.p.untrack(t)
}

// afterLocked is what happened to the tunnel once it was decided, the one
// place that says it for connect and sni records (record.OutcomeOf): a
// revalidation pass revoked it; the inspection engine's TLS failure; the
// upstream closed or reset the handshake before a server hello (the
// upstream failed, not the policy nor the client); else what its error
// says (afterOf: a refusal's failure, the idle timeout, the drain cut).
// t.mu is held.
func (t *tunnel) afterLocked() string {
	switch {
	case t.ex.isRevoked():
		return record.OutcomeRevoked
	case t.inspected != nil && t.inspected.Outcome == inspect.OutcomeUpstreamTLSFailed:
		return record.OutcomeUpstreamTLSFailed
	case t.inspected != nil && t.inspected.Outcome == inspect.OutcomeClientTLSFailed:
		return record.OutcomeClientTLSFailed
	case t.upstreamSilent && t.hello != nil && t.server == nil:
		return record.OutcomeUpstreamError
	}
	return afterOf(t.err)
}

// tlsLocked is the record's tls as far as the tunnel has seen it; nil when
// nothing was read from the client. t.mu is held.
func (t *tunnel) tlsLocked() *record.TLS {
	switch {
	case t.notTLS:
		return &record.TLS{Result: sniff.ResultNotTLS}
	case t.hello != nil:
		tl := &record.TLS{SNI: t.hello.SNI, ClientALPN: t.hello.ALPN, ECH: t.hello.ECH, Result: sniff.ResultNoServerHello}
		if s := t.server; s != nil {
			tl.Version, tl.Cipher, tl.ALPN, tl.Result = s.Version, s.Cipher, s.ALPN, s.Result
		}
		if t.inspected != nil {
			t.inspectedTLSLocked(tl)
		}
		return tl
	}
	return nil
}

// snapshot is the tunnel's record as it stands, for an interim record: the
// decision in force, what was seen of TLS (an inspected tunnel's
// tls.inspected and tls.origin_cert once established), the bytes and the
// inspected requests so far.
func (t *tunnel) snapshot() record.Record {
	ex := t.ex
	dec := ex.decision()
	t.mu.Lock()
	r := ex.rec
	if tl := t.tlsLocked(); tl != nil {
		r.TLS = tl
	}
	t.mu.Unlock()
	r.Host, r.Port, r.Peer = ex.host, ex.port, peerText(ex.peer) // fixed once admitted
	r.SetDecision(dec)
	r.BytesSent, r.BytesReceived = t.sent.Load(), t.recv.Load()
	r.Requests = t.inspReqs.Load()
	r.DurationMS = float64(time.Since(ex.start).Microseconds()) / 1000
	return r
}
