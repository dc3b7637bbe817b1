package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// copyBufs serves the portable relay (connections that are not TCP, or
// systems without splice).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relayCopy moves src to dst through a pooled buffer. It is the fallback of
// relay; it holds its buffer while parked, so it does not meet the
// per-tunnel memory target that the Linux splice path meets.
func (t *tunnel) relayCopy(dst, src net.Conn, n *atomic.Int64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	if err := src.SetReadDeadline(time.Now().Add(t.p.cfg.IdleTimeout)); err != nil {
		return err
	}
	for {
		k, err := src.Read(buf)
		if k > 0 {
			t.touch()
			w, werr := dst.Write(buf[:k])
			n.Add(int64(w))
			if werr != nil {
				return werr
			}
		}
		if err != nil {
			if isTimeout(err) {
				ok, ierr := t.extendIdle(src)
				if ok {
					continue
				}
				return ierr
			}
			return err
		}
	}
}
