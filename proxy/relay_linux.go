package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// relay moves src to dst until EOF or an error. Between two TCP connections
// on Linux it waits for readability without holding anything, asks the
// kernel how many bytes are queued (SIOCINQ) and splices exactly that many:
// the bytes never enter user space, and the pipe that splice(2) needs comes
// from the runtime's pool and goes back after each burst, so an idle tunnel
// holds no buffer and no pipe descriptors (a plain io.Copy would park inside
// splice holding a pipe, two descriptors per direction).
// smallBurst is the largest queued burst copied through user space instead
// of spliced.
const smallBurst = 16 << 10

// copyQueued moves avail bytes, already queued on src, to dst through a
// pooled buffer that goes back to the pool at once: an idle tunnel still
// holds none.
func (t *tunnel) copyQueued(dst, src *net.TCPConn, avail int, n *atomic.Int64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := (*bp)[:avail]
	k, err := src.Read(buf)
	if k > 0 {
		t.touch()
		w, werr := dst.Write(buf[:k])
		n.Add(int64(w))
		if werr != nil {
			return werr
		}
	}
	return err
}

func (t *tunnel) relay(dst, src net.Conn, n *atomic.Int64) error {
	d, ok1 := dst.(*net.TCPConn)
	s, ok2 := src.(*net.TCPConn)
	if !ok1 || !ok2 {
		return t.relayCopy(dst, src, n)
	}
	rc, err := s.SyscallConn()
	if err != nil {
		return t.relayCopy(dst, src, n)
	}
	if err := s.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
		return err
	}
	lr := &io.LimitedReader{R: s}
	var (
		avail int
		eof   bool
		ioErr error
	)
	wait := func(fd uintptr) bool {
		avail, eof, ioErr = 0, false, nil
		q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			ioErr = err
			return true
		}
		if q > 0 {
			avail = q
			return true
		}
		// Nothing queued: readable now means EOF or a pending error.
		var b [1]byte
		k, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false // park in the poller until readable
		case err != nil:
			ioErr = err
		case k == 0:
			eof = true
		default:
			avail = k // data arrived between the two calls
		}
		return true
	}
	for {
		if err := rc.Read(wait); err != nil {
			if isTimeout(err) {
				ok, ierr := t.extendIdle(s)
				if ok {
					continue
				}
				return ierr
			}
			return err
		}
		switch {
		case ioErr != nil:
			return ioErr
		case eof:
			return nil
		}
		if avail <= smallBurst {
			// A request or a response of a kept-alive exchange: one read
			// and one write through a pooled buffer cost fewer system
			// calls than two splices and a pipe from the pool.
			if err := t.copyQueued(d, s, avail, n); err != nil {
				return err
			}
			continue
		}
		lr.N = int64(avail)
		w, err := d.ReadFrom(lr) // splice(2): src → pipe → dst
		n.Add(w)
		t.touch()
		if err != nil {
			return err
		}
		if w == 0 {
			return nil
		}
	}
}
