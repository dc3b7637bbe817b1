package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

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

// readFailed is the idle step of every read of a tunnel (the relays, the
// first messages of both sides) from src that failed with err: a deadline
// expiry is moved on while the other direction moved bytes (true: read
// again), and is ErrIdle only when neither did for IdleTimeout; any other
// error ends the read as it is.
func (t *tunnel) readFailed(src net.Conn, err error) (bool, error) {
	if !isTimeout(err) {
		return false, err
	}
	last := time.Unix(0, t.last.Load())
	until := last.Add(t.p.cfg.IdleTimeout)
	if !time.Now().Before(until) {
		return false, ErrIdle
	}
	return true, src.SetReadDeadline(until)
}

// idleOn is readFailed for the first message read from src
// (sniff.Reading.Idle).
func (t *tunnel) idleOn(src net.Conn) func(error) (bool, error) {
	return func(err error) (bool, error) { return t.readFailed(src, err) }
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
