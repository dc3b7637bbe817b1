package dnsserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/egressd/egressd/admit"
)

// The UDP server: a fixed set of readers per socket, each reading a batch
// with one recvmmsg(2) and answering it with one sendmmsg(2), one reader
// at a time holding the read token (udpServer.tok), a query that must wait
// on the network handing its worker to a new goroutine (query.detach). Why each
// of these, with the figures: docs/architecture.md, "DNS server".

// udpReadSize is the read buffer of one datagram: queries with EDNS0
// options can exceed 512 bytes (the size miekg's server was given before).
const udpReadSize = 4096

// udpBatch is the most datagrams one reader takes from the socket at once.
const udpBatch = 32

// udpShare is the batch from which a reader passes the read token on
// before it answers.
const udpShare = 4

// udpReaders is how many workers read one UDP socket: one per processor.
func udpReaders() int { return max(2, runtime.GOMAXPROCS(0)) }

// udpOOBSize is the control-message buffer for the destination address of
// a query, IPv4 or IPv6, whichever is larger.
var udpOOBSize = max(len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)),
	len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface)))

type udpServer struct {
	s       *Server
	pc      net.PacketConn
	conn    batchConn
	pktinfo bool // reply from the address each query came to

	started chan struct{} // closed once the readers run
	closing atomic.Bool
	tok     chan struct{} // the right to read: one token

	queries sync.Pool // *udpQuery

	wg      sync.WaitGroup // workers running
	errOnce sync.Once
	err     error // the read error that stopped the server
}

// batchConn reads and writes datagrams in batches. ipv4.Message and
// ipv6.Message are the same type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newUDPServer(s *Server, pc net.PacketConn) *udpServer {
	u := &udpServer{s: s, pc: pc, conn: singleConn{pc},
		started: make(chan struct{}), tok: make(chan struct{}, 1)}
	u.tok <- struct{}{}
	u.queries.New = func() any {
		q := &udpQuery{u: u}
		q.detachFn = q.detach
		return q
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return u
	}
	local, err := netip.ParseAddrPort(uc.LocalAddr().String())
	if err != nil {
		return u
	}
	if local.Addr().Is4() {
		u.conn = ipv4.NewPacketConn(uc)
	} else {
		u.conn = ipv6.NewPacketConn(uc)
	}
	if local.Addr().IsUnspecified() {
		// Bound to every address: a reply must leave from the address the
		// query came to (a multi-homed node), which the kernel only does
		// with the destination's control message. Bound to one address,
		// that address is the source anyway.
		err6 := ipv6.NewPacketConn(uc).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
		err4 := ipv4.NewPacketConn(uc).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		u.pktinfo = err4 == nil || err6 == nil
	}
	return u
}

// singleConn is a batchConn of one datagram at a time, for a PacketConn
// that is not a UDP socket.
type singleConn struct{ pc net.PacketConn }

func (c singleConn) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	n, addr, err := c.pc.ReadFrom(ms[0].Buffers[0])
	if err != nil {
		return 0, err
	}
	ms[0].N, ms[0].NN, ms[0].Addr = n, 0, addr
	return 1, nil
}

func (c singleConn) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	for i := range ms {
		if _, err := c.pc.WriteTo(ms[i].Buffers[0], ms[i].Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

// serve runs the readers until shutdown or a read error, and waits for the
// queries in progress.
func (u *udpServer) serve() error {
	for range udpReaders() {
		u.run(u.newWorker())
	}
	close(u.started)
	u.wg.Wait()
	return u.err
}

// shutdown stops the readers (closing the socket) and waits for the
// queries in progress, up to ctx.
func (u *udpServer) shutdown(ctx context.Context) error {
	u.closing.Store(true)
	u.pc.Close()
	done := make(chan struct{})
	go func() { u.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail stops the server on a read error that is not shutdown's doing.
func (u *udpServer) fail(err error) {
	u.errOnce.Do(func() { u.err = err })
	u.pc.Close()
}

// run starts a goroutine for w, which reads and answers until one of its
// queries detaches (w then runs on in a new goroutine, and the old one
// answers that query and ends) or the server stops. After the stop it
// still starts one, so that the rest of w's batch is answered (or at least
// recorded): the caller is a running worker, so the WaitGroup is not zero.
func (u *udpServer) run(w *udpWorker) {
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		w.loop()
	}()
}

// udpWorker is one reader: its buffers, reused batch after batch, and the
// state of the query it serves.
type udpWorker struct {
	u        *udpServer
	in       []ipv4.Message // the datagrams read
	nin      int            // how many
	next     int            // the next to answer
	out      []ipv4.Message // their answers; Buffers[0] keeps its array
	nout     int
	lastOOB  []byte    // the control message of the last query
	replyOOB []byte    // the reply's control message for lastOOB
	q        *udpQuery // the state of the next query; replaced when one detaches
	// sent are the queries answered in this batch whose records wait for
	// the flush: the answers leave first (query.answered).
	sent   []*udpQuery
	hasTok bool // holds the read token (it moves with the worker)
}

func (u *udpServer) newWorker() *udpWorker {
	w := &udpWorker{u: u, in: make([]ipv4.Message, udpBatch), out: make([]ipv4.Message, udpBatch)}
	slab := make([]byte, udpBatch*udpReadSize)
	for i := range w.in {
		w.in[i].Buffers = [][]byte{slab[i*udpReadSize : (i+1)*udpReadSize : (i+1)*udpReadSize]}
		if u.pktinfo {
			w.in[i].OOB = make([]byte, udpOOBSize)
		}
		w.out[i].Buffers = [][]byte{nil}
	}
	w.q = u.queries.Get().(*udpQuery)
	return w
}

// udpQuery is the state of one datagram's query: the parsed message and
// the handler's query, reused query after query by a worker, and taken
// along by the goroutine of a query that detaches (with where to answer).
type udpQuery struct {
	u        *udpServer
	req      dns.Msg
	qr       query
	w        *udpWorker // the worker serving it; nil once detached
	m        *ipv4.Message
	addr     net.Addr // a detached query's client
	oob      []byte   // and the control message of its datagram
	buf      []byte   // a detached query's answer
	detachFn func()
}

// detach hands the worker, with the rest of its batch, to another
// goroutine: this one is about to wait on the network. The answers
// already made leave first. The query keeps where to answer.
func (q *udpQuery) detach() {
	w := q.w
	q.w = nil
	q.addr = q.m.Addr
	q.oob = append(q.oob[:0], q.m.OOB[:q.m.NN]...)
	q.m = nil
	w.flush()
	w.q = q.u.queries.Get().(*udpQuery)
	q.u.run(w)
}

// loop reads and answers with w. It returns when a query detached (w runs
// on in another goroutine; the caller must not touch it) or the server
// stopped.
func (w *udpWorker) loop() {
	for {
		for w.next < w.nin {
			m := &w.in[w.next]
			w.next++
			if w.serve(m) {
				return
			}
		}
		w.flush()
		if !w.hasTok {
			<-w.u.tok
			w.hasTok = true
		}
		n, err := w.u.conn.ReadBatch(w.in, 0)
		w.nin, w.next = max(n, 0), 0
		if err != nil || n >= udpShare {
			w.u.tok <- struct{}{}
			w.hasTok = false
		}
		if err != nil {
			if w.u.closing.Load() {
				return
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				continue
			}
			w.u.fail(fmt.Errorf("read: %w", err))
			return
		}
	}
}

// serve answers one datagram, with the filters of miekg's server: shorter
// than a header, dropped; an answer (QR), dropped (acceptQuery); a message
// that does not parse, FORMERR with the header only. It reports whether
// the query detached: then w belongs to another goroutine, and the answer
// was sent by this one.
func (w *udpWorker) serve(m *ipv4.Message) bool {
	pkt := m.Buffers[0][:m.N]
	if len(pkt) < 12 {
		return false
	}
	if acceptQuery(dns.Header{Bits: binary.BigEndian.Uint16(pkt[2:])}) != dns.MsgAccept {
		return false
	}
	q := w.q
	req := &q.req
	if err := req.Unpack(pkt); err != nil {
		// As miekg's server answers: the header (and whatever question
		// parsed, which the query carried), rcode FORMERR.
		req.SetRcodeFormatError(req)
		req.Zero = false
		req.Ns, req.Answer, req.Extra = nil, nil, nil
		if req.Len() > len(pkt) {
			// Questions that parsed may have been compressed in the
			// query: the source may be spoofed, amplify nothing.
			req.Question = nil
		}
		q.qr = query{}
		w.u.s.recordMalformed(&q.qr, admit.SourceAddr(m.Addr), req)
		w.add(req, m)
		return false
	}
	q.qr = query{detach: q.detachFn}
	q.w, q.m = w, m
	u := w.u
	resp := u.s.serveQuery(context.Background(), &q.qr, admit.SourceAddr(m.Addr), req, true)
	if q.w == nil {
		// Detached: w is another goroutine's now.
		u.answerDetached(q, resp)
		return true
	}
	q.w, q.m = nil, nil
	if resp != nil {
		w.add(resp, m)
	}
	if q.qr.stage == answered {
		// Its record (and its answer's buffers) wait for the flush: the
		// next query takes another state.
		w.sent = append(w.sent, q)
		w.q = u.queries.Get().(*udpQuery)
	}
	return false
}

// answerDetached sends the answer of a query that detached, alone, and
// gives its state back.
func (u *udpServer) answerDetached(q *udpQuery, resp *dns.Msg) {
	defer func() {
		u.s.recordNow(&q.qr) // when nothing was sent; a no-op after the answer
		q.addr = nil
		q.qr = query{}
		if cap(q.buf) > dns.MaxMsgSize {
			q.buf = nil // a huge answer's buffer is not kept
		}
		u.queries.Put(q)
	}()
	if resp == nil {
		return
	}
	if q.buf == nil {
		q.buf = make([]byte, udpReadSize)
	}
	b, err := resp.PackBuffer(q.buf[:cap(q.buf)])
	if err != nil {
		u.s.cfg.Logger.Debug("dns pack failed", "client", q.addr, "error", err)
		return
	}
	q.buf = b
	msg := [1]ipv4.Message{{Buffers: [][]byte{b}, Addr: q.addr}}
	if u.pktinfo {
		msg[0].OOB = replyControl(q.oob)
	}
	if _, err := u.conn.WriteBatch(msg[:], 0); err != nil {
		u.s.cfg.Logger.Debug("dns write failed", "client", q.addr, "error", err)
	}
	u.s.recordNow(&q.qr) // after the answer: its client does not wait for it
}

// add packs the answer to the datagram m for the next flush.
func (w *udpWorker) add(resp *dns.Msg, m *ipv4.Message) {
	o := &w.out[w.nout]
	buf := o.Buffers[0]
	if buf == nil {
		buf = make([]byte, udpReadSize)
	}
	b, err := resp.PackBuffer(buf[:cap(buf)])
	if err != nil {
		w.u.s.cfg.Logger.Debug("dns pack failed", "client", m.Addr, "error", err)
		return
	}
	o.Buffers[0], o.Addr, o.OOB = b, m.Addr, nil
	if w.u.pktinfo {
		o.OOB = w.replyControl(m.OOB[:m.NN])
	}
	w.nout++
}

// flush sends the answers made since the last flush, then writes their
// records.
func (w *udpWorker) flush() {
	ms := w.out[:w.nout]
	for len(ms) > 0 {
		n, err := w.u.conn.WriteBatch(ms, 0)
		if err != nil {
			// The first unsent answer failed; drop it, send the rest.
			w.u.s.cfg.Logger.Debug("dns write failed", "client", ms[max(n, 0)].Addr, "error", err)
			n = max(n, 0) + 1
		}
		ms = ms[n:]
	}
	for i := range w.out[:w.nout] {
		o := &w.out[i]
		if cap(o.Buffers[0]) > dns.MaxMsgSize {
			o.Buffers[0] = nil // a huge answer's buffer is not kept
		}
		o.Addr = nil
	}
	w.nout = 0
	// The answers left: now their records.
	for i, q := range w.sent {
		w.u.s.recordNow(&q.qr)
		q.qr = query{}
		w.u.queries.Put(q)
		w.sent[i] = nil
	}
	w.sent = w.sent[:0]
}

// replyControl returns the control message that makes the reply leave from
// the address the query was sent to. It is the same for every query to the
// same address on the same interface, so the last one is kept.
func (w *udpWorker) replyControl(oob []byte) []byte {
	if bytes.Equal(oob, w.lastOOB) {
		return w.replyOOB
	}
	w.lastOOB = append(w.lastOOB[:0], oob...)
	w.replyOOB = replyControl(oob)
	return w.replyOOB
}

// replyControl returns the control message of a reply to a datagram that
// came with oob: its source is the datagram's destination.
func replyControl(oob []byte) []byte {
	var dst net.IP
	cm6 := new(ipv6.ControlMessage)
	if cm6.Parse(oob) == nil && cm6.Dst != nil {
		dst = cm6.Dst
	} else if cm4 := new(ipv4.ControlMessage); cm4.Parse(oob) == nil && cm4.Dst != nil {
		dst = cm4.Dst
	}
	switch {
	case dst == nil:
		return nil
	case dst.To4() == nil:
		return (&ipv6.ControlMessage{Src: dst}).Marshal()
	default:
		// ipv6's Marshal ignores IPv4 addresses.
		return (&ipv4.ControlMessage{Src: dst}).Marshal()
	}
}
