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
// nothing), so an idle tunnel holds no buffer. The reads and writes are
// raw system calls (rawRead, rawWriter).
//
// The bytes pass through user space, burstSize at a time. Earlier a
// burst that filled the buffer switched the direction to splice(2)
// (socket → pipe → socket, no copy), which spent less of the proxy's CPU
// per GiB but moved a single tunnel's download about a tenth slower, and
// every burst cost a queue-size ioctl and two splices. The peer
// benchmark's bar is the single tunnel's rate; the copy's CPU per GiB
// stays below squid's and near smokescreen's (the figures:
// bench/proxy/retired.md).
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
	ww := newRawWriter(wc)
	if err := s.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
		return err
	}
	var (
		bp    *[]byte // holds got bytes; nil while parked
		got   int     // bytes read into bp
		eof   bool
		ioErr error
	)
	wait := func(fd uintptr) bool {
		got, eof, ioErr = 0, false, nil
		bp = copyBufs.Get().(*[]byte)
		k, err := rawRead(fd, (*bp)[:burstSize])
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
			if ok, ierr := t.readFailed(s, err); !ok {
				return ierr
			}
			continue
		}
		switch {
		case ioErr != nil:
			return ioErr
		case eof:
			return nil
		}
		t.touch()
		w, werr := ww.write((*bp)[:got])
		copyBufs.Put(bp)
		bp = nil
		n.Add(int64(w))
		if werr != nil {
			return werr
		}
		// The write may have waited on a slow reader for longer than the
		// idle timeout: bytes moved until now, so the tunnel is not idle
		// (the read deadline that passed meanwhile is extended above).
		t.touch()
	}
}

// burstSize is the most one read takes: the pooled buffer's size.
const burstSize = 32 << 10

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

// rawWriter writes with raw write(2) calls, as rawRead reads, waiting in
// the poller while the socket's buffer is full. One serves a relay: its
// callback is made once, not per write (a closure per write was an
// allocation per burst).
type rawWriter struct {
	wc   syscall.RawConn
	fn   func(fd uintptr) bool
	b    []byte
	done int
	err  error
}

func newRawWriter(wc syscall.RawConn) *rawWriter {
	w := &rawWriter{wc: wc}
	w.fn = w.step
	return w
}

// write writes all of b.
func (w *rawWriter) write(b []byte) (int, error) {
	w.b, w.done, w.err = b, 0, nil
	err := w.wc.Write(w.fn)
	if err == nil {
		err = w.err
	}
	n := w.done
	w.b = nil
	return n, err
}

func (w *rawWriter) step(fd uintptr) bool {
	for w.done < len(w.b) {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[w.done])), uintptr(len(w.b)-w.done))
		switch e {
		case 0:
			if n == 0 {
				w.err = io.ErrShortWrite
				return true
			}
			w.done += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false // wait until writable
		default:
			w.err = e
			return true
		}
	}
	return true
}
