package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
	"github.com/egressd/egressd/record"
)

// serveSNIConn serves one transparent TLS connection: peek the ClientHello
// (bounded bytes and PeekTimeout), decide on its SNI and the listener's
// port, dial through the guard, replay the hello and relay. Every path ends
// in exactly one record.
func (p *Proxy) serveSNIConn(t *tunnel, port int) {
	ex := t.ex
	ex.port = port
	started := false
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("proxy: panic in SNI connection", "panic", v)
			ex.rec.Error = fmt.Sprintf("internal error: %v", v)
			started = false
		}
		if !started {
			t.closeBoth()
			t.mu.Lock()
			after := t.afterLocked() // a refusal's failure, if any
			t.mu.Unlock()
			ex.finish(after, t.err)
			p.untrack(t)
		}
	}()
	// Identity first: an unknown client gets nothing read from it.
	if p.identify(ex) == nil {
		p.admit(ex, "", port)
		return
	}
	buf, ch, err := readHello(t.client, p.cfg.PeekTimeout)
	switch {
	case errors.Is(err, sniff.ErrNotTLS):
		ex.rec.TLS = &record.TLS{Result: sniff.ResultNotTLS}
		p.denyNoSNI(ex, errors.New("proxy: not a TLS ClientHello"))
		return
	case err != nil:
		p.denyNoSNI(ex, fmt.Errorf("proxy: reading ClientHello: %w", err))
		return
	case ch.SNI == "":
		ex.rec.TLS = &record.TLS{ClientALPN: ch.ALPN, ECH: ch.ECH, Result: sniff.ResultNoServerHello}
		p.denyNoSNI(ex, errors.New("proxy: ClientHello without SNI"))
		return
	}
	ex.rec.TLS = &record.TLS{SNI: ch.SNI, ClientALPN: ch.ALPN, ECH: ch.ECH, Result: sniff.ResultNoServerHello}
	if rf := p.admit(ex, ch.SNI, port); rf != nil {
		t.fail(rf)
		return
	}
	// Refused before any dial: nothing reaches the front.
	d, herr := checkHello(ex.decision(), &ch, "")
	ex.fold(d)
	if herr != nil {
		t.fail(herr)
		return
	}
	// The dial ends at the drain deadline, as a CONNECT's does.
	ctx, cancel := context.WithTimeout(p.cutCtx, p.cfg.DialTimeout*4)
	up, rf := p.dialGuarded(ctx, ex)
	cancel()
	if rf != nil {
		t.fail(rf)
		return
	}
	if !t.setUpstream(up) {
		return // cut while dialling
	}
	started = true
	t.start(buf, &ch, "", true)
}

// denyNoSNI refuses a transparent TLS connection whose destination cannot
// be named: there is no host to decide on.
func (p *Proxy) denyNoSNI(ex *exchange, err error) {
	p.identify(ex)
	ex.fold(policy.Denied(policy.ReasonNoSNI))
	ex.rec.Error = audit.RedactText(err.Error())
}

// readHello reads a whole ClientHello within timeout, at most
// sniff.MaxHelloBytes, and clears the read deadline after it.
func readHello(c sniff.Conn, timeout time.Duration) ([]byte, sniff.ClientHello, error) {
	defer c.SetReadDeadline(time.Time{})
	return sniff.Read(c, make([]byte, 0, 2<<10), sniff.Reading{Max: sniff.MaxHelloBytes, Rest: timeout}, sniff.ParseClientHello)
}
