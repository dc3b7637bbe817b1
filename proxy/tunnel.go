package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
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
	// Set by start: from then on revocation decides the tunnel again.
	admitted bool
	peer     netip.AddrPort  // the dialled address, for the guard
	check    string          // the CONNECT host; "" on the SNI listener
	dec      policy.Decision // the decision in force; the record's at the end
	revoked  bool            // cut by Revalidate; dec is the new decision
	// Written under mu by the direction that reads them; read by end, by
	// Revalidate and by interim snapshots.
	notTLS bool
	hello  *clientHello
	head   *httpHead
	server *serverHello

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
	// interimDone unregisters the tunnel from interim records.
	interimDone func()

	// release frees the client's slot of MaxConnsPerClient; nil when the
	// tunnel holds none.
	release func()
}

func newTunnel(p *Proxy, client net.Conn) *tunnel {
	t := &tunnel{p: p, client: client}
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
func (t *tunnel) start(pre []byte, hello *clientHello, check string, inline bool) {
	ex := t.ex
	if ex.rec.ID == "" {
		ex.rec.ID = audit.NewID()
	}
	if ex.rec.Start.IsZero() {
		ex.rec.Start = ex.start
	}
	peer, _ := netip.ParseAddrPort(ex.rec.Peer)
	t.mu.Lock()
	t.admitted, t.peer, t.check, t.dec = true, peer, check, ex.dec
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
	t.pending.Store(2)
	t.p.relays.Go(func() { t.guard(t.serverSide) })
	if inline {
		t.guard(func() { t.clientSide(pre, hello, check) })
		return
	}
	t.p.relays.Go(func() { t.guard(func() { t.clientSide(pre, hello, check) }) })
}

// guard runs one direction; no panic leaves it: it is logged, the tunnel
// closed and the record still written.
func (t *tunnel) guard(f func()) {
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
	if t.admitted {
		ex.dec = t.dec
	}
	switch {
	case t.revoked:
		ex.outcome = record.OutcomeRevoked
	case t.upstreamSilent && t.hello != nil && t.server == nil:
		// The upstream closed or reset the handshake before a server
		// hello: the upstream failed, not the policy nor the client.
		ex.outcome = record.OutcomeUpstreamError
	}
	t.mu.Unlock()
	ex.finish(t.err)
	t.p.untrack(t)
}

// tlsLocked is the record's tls as far as the tunnel has seen it; nil when
// nothing was read from the client. t.mu is held.
func (t *tunnel) tlsLocked() *record.TLS {
	switch {
	case t.notTLS:
		return &record.TLS{Result: resultNotTLS}
	case t.hello != nil:
		tl := &record.TLS{SNI: t.hello.SNI, ClientALPN: t.hello.ALPN, ECH: t.hello.ECH, Result: resultNoServerHello}
		if s := t.server; s != nil {
			tl.Version, tl.Cipher, tl.ALPN, tl.Result = s.Version, s.Cipher, s.ALPN, s.Result
		}
		return tl
	}
	return nil
}

// snapshot is the tunnel's record as it stands, for an interim record: the
// decision in force, what was seen of TLS and the bytes so far.
func (t *tunnel) snapshot() record.Record {
	ex := t.ex
	t.mu.Lock()
	r := ex.rec
	dec := t.dec
	if tl := t.tlsLocked(); tl != nil {
		r.TLS = tl
	}
	t.mu.Unlock()
	r.Host, r.Port = ex.host, ex.port
	r.SetDecision(dec)
	r.BytesSent, r.BytesReceived = t.sent.Load(), t.recv.Load()
	r.DurationMS = float64(time.Since(ex.start).Microseconds()) / 1000
	return r
}

// clientSide reads and checks the client's first message, forwards it,
// then relays client to upstream.
func (t *tunnel) clientSide(pre []byte, hello *clientHello, check string) {
	if t.clientFirst(pre, hello, check) {
		t.pipe(t.upstream, t.client, &t.sent)
		// A TLS client that ends its side before the server said a word
		// gave up waiting (TLS clients do not half-close before the
		// handshake): waiting on for the server would hold the tunnel, its
		// record and two descriptors until the idle timeout.
		t.mu.Lock()
		gaveUp := t.hello != nil && t.server == nil && t.recv.Load() == 0
		t.mu.Unlock()
		if gaveUp {
			t.closeBoth()
		}
	}
}

// clientFirst reads (unless given) and checks the client's first message (a
// ClientHello: checkHello; a plaintext HTTP head: checkPlainHead; anything
// else passes as not-tls) and forwards it; false when the direction has
// ended. The buffer it read into goes back to the pool before the relay
// starts.
func (t *tunnel) clientFirst(pre []byte, hello *clientHello, check string) bool {
	up := t.upstream
	if hello == nil {
		buf, first, err := t.peekFirst(pre)
		defer putHelloBuf(buf)
		switch {
		case errors.Is(err, errNotTLS):
			t.setNotTLS() // another protocol (SSH, ...): relayed as is
		case err != nil && len(buf) == 0 && errors.Is(err, io.EOF):
			// The client closed without sending anything.
			closeWrite(up)
			return false
		case err != nil && len(buf) == 0:
			// Idle, cut or reset before a first byte: not a refusal.
			t.endDirection(up, err)
			return false
		case err != nil:
			if errors.Is(err, errBadHead) {
				t.setNotTLS()
			}
			t.refuse(policy.Denied(policy.ReasonBadRequest), fmt.Errorf("proxy: reading the tunnel's first bytes: %w", err))
			return false
		case first.head != nil:
			t.mu.Lock()
			t.notTLS, t.head = true, first.head
			d, err := checkPlainHead(t.dec, first.head, check, t.ex.port)
			t.setDecLocked(d)
			t.mu.Unlock()
			if err != nil {
				t.fail(err)
				t.closeBoth()
				return false
			}
		default:
			hello = first.hello
		}
		pre = buf
	}
	if hello != nil {
		t.mu.Lock()
		t.hello = hello
		d, err := checkHello(t.dec, hello, check)
		t.setDecLocked(d)
		t.mu.Unlock()
		if err != nil {
			t.fail(err)
			t.closeBoth()
			return false
		}
	}
	if len(pre) > 0 {
		n, err := up.Write(pre)
		t.sent.Add(int64(n))
		if err != nil {
			t.fail(err)
			t.closeBoth()
			return false
		}
	}
	return true
}

// helloBufs holds the buffers that a client's first message or the
// server's first flight is read into: a ClientHello with a post-quantum key share is about
// 2 KiB, a server's first read a few KiB. They go back before the relay
// starts, so an idle tunnel holds none.
var helloBufs = sync.Pool{New: func() any { b := make([]byte, helloBufSize); return &b }}

const helloBufSize = 8 << 10

func getHelloBuf() []byte { return (*helloBufs.Get().(*[]byte))[:0] }

// putHelloBuf returns b to the pool unless it grew past the pooled size (a
// hostile or odd peer's; the next GC takes it).
func putHelloBuf(b []byte) {
	if cap(b) != helloBufSize {
		return
	}
	b = b[:cap(b)]
	helloBufs.Put(&b)
}

// refuse closes a tunnel whose 200 was already sent: the only way left to
// refuse it. The record carries the denial.
func (t *tunnel) refuse(d policy.Decision, err error) {
	t.mu.Lock()
	t.setDecLocked(d)
	t.mu.Unlock()
	t.fail(err)
	t.closeBoth()
}

// setDecLocked makes d the decision in force, unless Revalidate revoked
// the tunnel meanwhile: its decision stays the record's. t.mu is held.
func (t *tunnel) setDecLocked(d policy.Decision) {
	if !t.revoked {
		t.dec = d
	}
}

func (t *tunnel) setNotTLS() {
	t.mu.Lock()
	t.notTLS = true
	t.mu.Unlock()
}

// checkHello is the TLS step of every tunnel: d is the decision of the
// destination, host the CONNECT host that the SNI must name (empty on the
// SNI listener, where the SNI is the host that was decided). An SNI naming
// another site behind the same address is domain fronting (sni-mismatch);
// a hello with Encrypted Client Hello hides the name the server will serve
// behind the outer SNI (ech) unless the deciding rule accepts that (ech:
// allow, which accepts every tenant of the front). The first failing check
// decides; the error is nil when the returned decision allows (possibly as
// would_deny in audit mode).
func checkHello(d policy.Decision, ch *clientHello, host string) (policy.Decision, error) {
	var r policy.Reason
	var err error
	switch {
	case host != "" && ch.SNI != "" && !sameHost(ch.SNI, host):
		r, err = policy.ReasonSNIMismatch, fmt.Errorf("proxy: SNI %q differs from CONNECT host %q", ch.SNI, host)
	case ch.ECH && !d.ECH:
		r, err = policy.ReasonECH, fmt.Errorf("proxy: ClientHello with Encrypted Client Hello (outer SNI %q), no rule accepts it", ch.SNI)
	default:
		return d, nil
	}
	if d = d.Deny(r); d.Allowed() {
		return d, nil
	}
	return d, err
}

// sameHost reports whether raw, a name as a client sent it, normalizes to
// host.
func sameHost(raw, host string) bool {
	n, err := policy.NormalizeHost(raw)
	return err == nil && n == host
}

// serverSide observes the server's first flight, forwards it, then relays
// upstream to client.
func (t *tunnel) serverSide() {
	up := t.upstream
	buf := getHelloBuf()
	if err := up.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
		t.fail(err)
		t.closeBoth()
		return
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := up.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			t.touch()
			sh, perr := parseServerFirst(buf)
			if !errors.Is(perr, errNeedMore) || len(buf) >= maxHelloBytes {
				if perr == nil {
					t.mu.Lock()
					t.server = &sh
					t.mu.Unlock()
				}
				break
			}
		}
		if err != nil {
			if isTimeout(err) {
				if ok, ierr := t.extendIdle(up); ok {
					continue
				} else if ierr != nil {
					err = ierr
				}
			}
			if len(buf) > 0 {
				break // forward what came, the relay sees the error again
			}
			putHelloBuf(buf)
			// Silent unless the tunnel closed it itself (the client's
			// side ended, a refusal, a revocation, a cut) or it idled.
			t.mu.Lock()
			t.upstreamSilent = !t.closed && !errors.Is(err, ErrIdle)
			t.mu.Unlock()
			t.endDirection(t.client, err)
			return
		}
	}
	// The relay sets its own read deadline on up at once.
	n, err := t.client.Write(buf)
	putHelloBuf(buf)
	t.recv.Add(int64(n))
	if err != nil {
		t.fail(err)
		t.closeBoth()
		return
	}
	t.pipe(t.client, up, &t.recv)
}

// first is what a tunnel's client sent first: a ClientHello, a plaintext
// HTTP request head, or (neither) another protocol.
type first struct {
	hello *clientHello
	head  *httpHead
}

// parseFirst reads the start of a tunnel: errNeedMore asks for more bytes,
// errNotTLS means another protocol, relayed unchecked.
func (t *tunnel) parseFirst(b []byte) (first, error) {
	ch, err := parseClientHello(b)
	if err == nil {
		return first{hello: &ch}, nil
	}
	if !errors.Is(err, errNotTLS) {
		return first{}, err
	}
	h, err := parseHTTPHead(b, t.p.cfg.MaxHeaderBytes)
	switch {
	case err == nil:
		return first{head: &h}, nil
	case errors.Is(err, errNotHTTP):
		return first{}, errNotTLS
	}
	return first{}, err
}

// peekFirst reads the client's first message: a ClientHello (at most
// maxHelloBytes) or a plaintext HTTP request head (at most MaxHeaderBytes).
// The first byte may take as long as the idle timeout (a client may wait
// for the server to speak first); the rest must arrive within PeekTimeout.
func (t *tunnel) peekFirst(pre []byte) ([]byte, first, error) {
	c := t.client
	limit := max(maxHelloBytes, t.p.cfg.MaxHeaderBytes)
	// No deadline reset at the end: the relay sets its own at once, and on
	// failure the tunnel closes.
	buf := append(getHelloBuf(), pre...)
	var peekUntil time.Time
	idleSet := false
	for {
		if len(buf) > 0 {
			f, err := t.parseFirst(buf)
			if !errors.Is(err, errNeedMore) {
				return buf, f, err
			}
			if len(buf) >= limit {
				return buf, f, fmt.Errorf("%w: over %d bytes", errMalformed, limit)
			}
			if peekUntil.IsZero() {
				peekUntil = time.Now().Add(t.p.cfg.PeekTimeout)
			}
			if err := c.SetReadDeadline(peekUntil); err != nil {
				return buf, f, err
			}
		} else if !idleSet {
			if err := c.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
				return buf, first{}, err
			}
			idleSet = true
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := c.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			t.touch()
		}
		if err != nil {
			if len(buf) == 0 && isTimeout(err) {
				ok, ierr := t.extendIdle(c)
				if ok {
					continue
				}
				if ierr != nil {
					err = ierr
				}
			}
			if len(buf) > 0 {
				if _, perr := t.parseFirst(buf); !errors.Is(perr, errNeedMore) {
					continue // complete or decisive: let the top of the loop answer
				}
			}
			return buf, first{}, err
		}
	}
}

// pipe relays src to dst until src ends, then half-closes dst so that the
// peer sees EOF while the other direction may still run (RFC 9293 §3.6).
func (t *tunnel) pipe(dst, src net.Conn, n *atomic.Int64) {
	err := t.relay(dst, src, n)
	t.endDirection(dst, err)
}

// endDirection finishes one direction: EOF half-closes dst, an error closes
// the whole tunnel. The last direction to end does not half-close: end
// closes both connections next, and the close sends the same FIN (nothing
// is left unread on dst, whose reader ended at its EOF or closed both).
func (t *tunnel) endDirection(dst net.Conn, err error) {
	if err == nil || errors.Is(err, io.EOF) {
		if t.pending.Load() > 1 {
			closeWrite(dst)
		}
		return
	}
	if !t.cutting.Load() {
		t.fail(err)
	}
	t.closeBoth()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// extendIdle turns a read deadline into an idle decision: the deadline is
// moved while the other direction moved bytes, and ErrIdle comes only when
// neither did for IdleTimeout.
func (t *tunnel) extendIdle(src net.Conn) (bool, error) {
	last := time.Unix(0, t.last.Load())
	until := last.Add(t.p.cfg.IdleTimeout)
	if !time.Now().Before(until) {
		return false, ErrIdle
	}
	return true, src.SetReadDeadline(until)
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
