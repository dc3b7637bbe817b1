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
)

// The UDP server is a fixed set of reader goroutines, each looping read →
// handle → write with its own buffers, instead of miekg's goroutine per
// packet: a fresh goroutine per query costs a stack growth (the handler
// needs more than the initial 2 KiB) and a buffer per packet, which was a
// third of the CPU of a warm-cache query. A reader takes every datagram
// waiting, up to udpBatch, in one recvmmsg(2) and sends their answers in one
// sendmmsg(2) (Linux; elsewhere one at a time): under load the system calls
// are most of the cost of a cached answer, and an idle server still reads
// and answers one datagram at a time, without waiting for a batch to fill.
// TCP stays with miekg.
//
// A reader never waits on the network while others queue behind it: before
// a query may block (a cache miss, cluster DNS, transparent lookups), the
// handler calls query.detach, which starts a new reader in its place; the
// detached goroutine answers its query and ends. So cached answers keep
// flowing while upstreams are slow, as with a goroutine per packet.

// udpReadSize is the read buffer of one reader: queries with EDNS0 options
// can exceed 512 bytes (the size miekg's server was given before).
const udpReadSize = 4096

// udpBatch is the most datagrams one reader takes from the socket at once.
const udpBatch = 16

// udpReaders is how many goroutines read one UDP socket.
func udpReaders() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

// udpOOBSize is the control-message buffer for the destination address of
// a query, IPv4 or IPv6, whichever is larger.
var udpOOBSize = max(len(ipv4.NewControlMessage(ipv4.FlagDst|ipv4.FlagInterface)),
	len(ipv6.NewControlMessage(ipv6.FlagDst|ipv6.FlagInterface)))

type udpServer struct {
	s       *Server
	pc      net.PacketConn
	conn    batchConn
	pktinfo bool // reply from the address each query came to

	started chan struct{} // closed once the first readers run
	closing atomic.Bool

	// idle holds the detached readers done with their query, parked until
	// spawn hands them a batch. Once stopped, no reader parks and those
	// parked are woken (to find the socket closed and end): a reader must
	// never wait in idle after it stopped waiting, or spawn would hand it
	// datagrams nobody answers or records.
	idleMu  sync.Mutex
	idle    []*udpWorker
	stopped bool

	wg      sync.WaitGroup // readers, detached and parked ones
	errOnce sync.Once
	err     error // the read error that stopped the server
}

// udpIdle is how many detached readers stay parked for the next detach,
// so that a burst of cache misses does not start a goroutine (and grow its
// stack, and allocate its buffers) for each.
const udpIdle = 64

// batchConn reads and writes datagrams in batches. ipv4.Message and
// ipv6.Message are the same type.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newUDPServer(s *Server, pc net.PacketConn) *udpServer {
	u := &udpServer{s: s, pc: pc, conn: singleConn{pc},
		started: make(chan struct{})}
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
		u.spawn(nil)
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
	u.stopParked()
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
	u.stopParked()
}

// stopParked wakes the parked readers, once the socket is closed: they
// read, fail and end. No reader parks after it.
func (u *udpServer) stopParked() {
	u.idleMu.Lock()
	u.stopped = true
	parked := u.idle
	u.idle = nil
	u.idleMu.Unlock()
	for _, w := range parked {
		w.take(nil)
		w.wake <- struct{}{}
	}
}

// spawn starts a reader, a parked one if there is one; it first answers
// the datagrams of pending, the rest of a detached reader's batch. After
// the server stopped it still starts one, to answer (or at least record)
// pending: the caller is a running reader, so the WaitGroup is not zero.
func (u *udpServer) spawn(pending []ipv4.Message) {
	u.idleMu.Lock()
	var w *udpWorker
	if n := len(u.idle); n > 0 {
		w = u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
	}
	u.idleMu.Unlock()
	if w != nil {
		w.take(pending)
		w.wake <- struct{}{}
		return
	}
	u.wg.Add(1)
	w = &udpWorker{u: u, in: make([]ipv4.Message, udpBatch), out: make([]ipv4.Message, udpBatch), wake: make(chan struct{}, 1)}
	slab := make([]byte, udpBatch*udpReadSize)
	for i := range w.in {
		w.in[i].Buffers = [][]byte{slab[i*udpReadSize : (i+1)*udpReadSize : (i+1)*udpReadSize]}
		if u.pktinfo {
			w.in[i].OOB = make([]byte, udpOOBSize)
		}
		w.out[i].Buffers = [][]byte{nil}
	}
	w.take(pending)
	w.detachFn = w.detach
	go w.loop()
}

// take copies pending into the reader's batch, to be answered first.
func (w *udpWorker) take(pending []ipv4.Message) {
	for i, m := range pending {
		in := &w.in[i]
		in.N = copy(in.Buffers[0], m.Buffers[0][:m.N])
		in.NN = copy(in.OOB, m.OOB[:m.NN])
		in.Addr = m.Addr
	}
	w.nin, w.next = len(pending), 0
}

// park is where a detached reader goes after its query: it waits to be
// woken by the next detach (or by stopParked), or ends when there are
// enough parked already or the server stopped. It reports whether the
// reader is reading again.
func (w *udpWorker) park() bool {
	w.detached = false
	u := w.u
	u.idleMu.Lock()
	if u.stopped || len(u.idle) >= udpIdle {
		u.idleMu.Unlock()
		return false
	}
	u.idle = append(u.idle, w)
	u.idleMu.Unlock()
	<-w.wake
	return true
}

// udpWorker is one reader with its buffers, reused batch after batch.
type udpWorker struct {
	u        *udpServer
	in       []ipv4.Message // the datagrams read
	nin      int            // how many
	next     int            // the next to answer
	out      []ipv4.Message // their answers; Buffers[0] keeps its array
	nout     int
	lastOOB  []byte // the control message of the last query
	replyOOB []byte // the reply's control message for lastOOB
	req      dns.Msg
	qr       query
	detached bool
	detachFn func()
	wake     chan struct{} // a parked reader is woken by spawn
}

// detach hands the reading on to a new goroutine, with the rest of the
// batch: this one is about to wait on the network, and ends after this
// query. The answers already made leave first.
func (w *udpWorker) detach() {
	if w.detached {
		return
	}
	w.detached = true
	w.flush()
	w.u.spawn(w.in[w.next:w.nin])
	w.nin = w.next
}

func (w *udpWorker) loop() {
	defer w.u.wg.Done()
	for {
		for w.next < w.nin {
			m := &w.in[w.next]
			w.next++
			w.serve(m)
			if w.detached {
				w.flush()
				if !w.park() {
					return
				}
			}
		}
		w.flush()
		n, err := w.u.conn.ReadBatch(w.in, 0)
		w.nin, w.next = max(n, 0), 0
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
// that does not parse, FORMERR with the header only.
func (w *udpWorker) serve(m *ipv4.Message) {
	pkt := m.Buffers[0][:m.N]
	if len(pkt) < 12 {
		return
	}
	if acceptQuery(dns.Header{Bits: binary.BigEndian.Uint16(pkt[2:])}) != dns.MsgAccept {
		return
	}
	req := &w.req
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
		w.qr = query{}
		w.u.s.recordMalformed(&w.qr, addrOf(m.Addr), req)
		w.add(req, m)
		return
	}
	w.qr = query{detach: w.detachFn}
	if resp := w.u.s.serveQuery(context.Background(), &w.qr, addrOf(m.Addr), req, true); resp != nil {
		w.add(resp, m)
	}
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

// flush sends the answers made since the last flush.
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
}

// replyControl returns the control message that makes the reply leave from
// the address the query was sent to. It is the same for every query to the
// same address on the same interface, so the last one is kept.
func (w *udpWorker) replyControl(oob []byte) []byte {
	if bytes.Equal(oob, w.lastOOB) {
		return w.replyOOB
	}
	w.lastOOB = append(w.lastOOB[:0], oob...)
	w.replyOOB = nil
	var dst net.IP
	cm6 := new(ipv6.ControlMessage)
	if cm6.Parse(oob) == nil && cm6.Dst != nil {
		dst = cm6.Dst
	} else if cm4 := new(ipv4.ControlMessage); cm4.Parse(oob) == nil && cm4.Dst != nil {
		dst = cm4.Dst
	}
	switch {
	case dst == nil:
	case dst.To4() == nil:
		w.replyOOB = (&ipv6.ControlMessage{Src: dst}).Marshal()
	default:
		// ipv6's Marshal ignores IPv4 addresses.
		w.replyOOB = (&ipv4.ControlMessage{Src: dst}).Marshal()
	}
	return w.replyOOB
}
