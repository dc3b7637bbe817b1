package proxy

import (
	"errors"

	"github.com/egressd/egressd/proxy/internal/sniff"
)

// serverSide observes the server's first flight, forwards it, then relays
// upstream to client.
func (t *tunnel) serverSide() {
	up := t.upstream
	// The whole flight under the idle timeout, no peek timeout: a server
	// may think before it answers.
	buf, sh, err := sniff.Read(up, getHelloBuf(), sniff.Reading{
		Max: sniff.MaxHelloBytes, First: t.p.cfg.IdleTimeout, Idle: t.idleOn(up), Got: t.touch,
	}, sniff.ParseServerFirst)
	switch {
	case err == nil:
		t.mu.Lock()
		t.server = &sh
		t.mu.Unlock()
	case len(buf) == 0:
		putHelloBuf(buf)
		// Silent unless the tunnel closed it itself (the client's side
		// ended, a refusal, a revocation, a cut) or it idled.
		t.mu.Lock()
		t.upstreamSilent = !t.closed && !errors.Is(err, ErrIdle)
		t.mu.Unlock()
		t.endDirection(t.client, err)
		return
	}
	// Otherwise (a flight that does not parse, or a read that failed after
	// some bytes) what came is forwarded; the relay sees the error again.
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
