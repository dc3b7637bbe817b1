package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// copyBufs holds the relays' buffers (relay_linux.go takes one per burst;
// the portable relay holds one while it runs).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relayCopy moves src to dst through a pooled buffer. It is the fallback of
// relay (connections that are not TCP, systems other than Linux); it holds
// its buffer while parked, so it does not meet the per-tunnel memory target
// that the Linux relay meets.
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
			t.touch() // a write that waited on a slow reader is not idleness
		}
		if err != nil {
			if ok, ierr := t.readFailed(src, err); !ok {
				return ierr
			}
		}
	}
}
