package proxy

import (
	"errors"
	"time"

	"github.com/egressd/egressd/proxy/internal/sniff"
)

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
			sh, perr := sniff.ParseServerFirst(buf)
			if !errors.Is(perr, sniff.ErrNeedMore) || len(buf) >= sniff.MaxHelloBytes {
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
