package proxy

import (
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// relay moves src to dst until EOF or an error. Between two TCP connections
// on Linux it waits for readability without holding anything: when the
// poller says readable, a buffer comes from the pool for one non-blocking
// read and goes back after the write (or at once when the read found
// nothing), so an idle tunnel holds no buffer. A read that fills the buffer
// marks a bulk transfer: from then on the queued size (SIOCINQ) is asked
// first and a large queue is spliced, the bytes never entering user space
// (the pipe that splice(2) needs comes from the runtime's pool and goes back
// after each burst; a plain io.Copy would park inside splice holding a pipe,
// two descriptors per direction). A small burst thus costs one read and one
// write, as in a plain copy loop.
//
// These reads and writes are raw system calls (rawRead, rawWrite).
//
// smallBurst is the buffer's size: the largest burst copied through user
// space instead of spliced.
const smallBurst = 16 << 10

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
	wc, err := d.SyscallConn()
	if err != nil {
		return t.relayCopy(dst, src, n)
	}
	if err := s.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
		return err
	}
	lr := &io.LimitedReader{R: s}
	var (
		bp    *[]byte // holds got bytes; nil while parked
		got   int     // bytes read into bp
		avail int     // bytes queued for a splice
		bulk  bool    // the last burst filled the buffer: ask the queue size first
		eof   bool
		ioErr error
	)
	wait := func(fd uintptr) bool {
		got, avail, eof, ioErr = 0, 0, false, nil
		if bulk {
			q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
			if err != nil {
				ioErr = err
				return true
			}
			if q > smallBurst {
				avail = q
				return true
			}
			bulk = false
		}
		// A small burst (a request, a response, a TLS record) costs one
		// read and one write: the buffer comes from the pool for the read
		// and goes back when it found nothing, so a parked relay holds none.
		bp = copyBufs.Get().(*[]byte)
		k, err := rawRead(fd, (*bp)[:smallBurst])
		switch {
		case err == unix.EAGAIN:
			copyBufs.Put(bp)
			bp = nil
			return false // park in the poller until readable
		case err != nil:
			ioErr = err
		case k == 0:
			eof = true
		default:
			got = k
			return true
		}
		copyBufs.Put(bp)
		bp = nil
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
		case got > 0:
			t.touch()
			w, werr := rawWrite(wc, (*bp)[:got])
			copyBufs.Put(bp)
			bp = nil
			n.Add(int64(w))
			if werr != nil {
				return werr
			}
			// A full buffer means more is probably queued: a bulk
			// transfer, spliced from the next round on.
			bulk = got == smallBurst
			continue
		}
		lr.N = int64(avail)
		w, err := d.ReadFrom(lr) // splice(2): src → pipe → dst
		n.Add(w)
		t.touch()
		if err != nil {
			// The read deadline may pass while splice waits on dst: an
			// idle decision, as for rc.Read, not an error.
			if isTimeout(err) {
				ok, ierr := t.extendIdle(s)
				if ok {
					continue
				}
				return ierr
			}
			return err
		}
		if w == 0 {
			return nil
		}
	}
}

// rawRead is read(2) on a non-blocking descriptor without the scheduler's
// system-call bookkeeping (RawSyscall): such a call cannot block, and a
// goroutine marked as in a system call is what the runtime's monitor
// (sysmon) takes the processor from, handing it to another thread, once
// the call has lasted one of its ticks (20 µs), which a loopback or busy
// socket's call often does; every such hand-off also resets the monitor
// to polling every 20 µs. On a keep-alive tunnel, where these calls are
// nearly all the proxy does, raw calls cut the CPU per request by about
// a tenth (bench/peer, keep-alive).
func rawRead(fd uintptr, b []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// rawWrite writes all of b to the connection of wc with raw write(2)
// calls, as rawRead reads, waiting in the poller while the socket's buffer
// is full.
func rawWrite(wc syscall.RawConn, b []byte) (int, error) {
	done := 0
	var werr error
	err := wc.Write(func(fd uintptr) bool {
		for done < len(b) {
			n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[done])), uintptr(len(b)-done))
			switch e {
			case 0:
				if n == 0 {
					werr = io.ErrShortWrite
					return true
				}
				done += int(n)
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait until writable
			default:
				werr = e
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return done, err
}
