package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
)

// clientSide reads and checks the client's first message, forwards it,
// then relays client to upstream.
func (t *tunnel) clientSide(pre []byte, hello *sniff.ClientHello, check string) {
	if t.clientFirst(pre, hello, check) {
		t.pipe(t.upstream, t.client, &t.sent)
		// A TLS client that ends its side before the server said a word
		// gave up waiting (TLS clients do not half-close before the
		// handshake): waiting on for the server would hold the tunnel, its
		// record and two descriptors until the idle timeout.
		t.mu.Lock()
		gaveUp := t.hello != nil && t.server == nil && t.recv.Load() == 0
		t.mu.Unlock()
		if gaveUp {
			t.closeBoth()
		}
	}
}

// clientFirst reads (unless given) and checks the client's first message (a
// ClientHello: checkHello; a plaintext HTTP head: checkPlainHead; anything
// else passes as not-tls) and forwards it; false when the direction has
// ended. The buffer it read into goes back to the pool before the relay
// starts.
func (t *tunnel) clientFirst(pre []byte, hello *sniff.ClientHello, check string) bool {
	up := t.upstream
	if hello == nil {
		buf, first, err := t.peekFirst(pre)
		defer putHelloBuf(buf)
		switch {
		case errors.Is(err, sniff.ErrNotTLS):
			t.setNotTLS() // another protocol (SSH, ...): relayed as is
		case err != nil && len(buf) == 0 && errors.Is(err, io.EOF):
			// The client closed without sending anything.
			closeWrite(up)
			return false
		case err != nil && len(buf) == 0:
			// Idle, cut or reset before a first byte: not a refusal.
			t.endDirection(up, err)
			return false
		case err != nil:
			if errors.Is(err, sniff.ErrBadHead) {
				t.setNotTLS()
			}
			t.refuse(policy.Denied(policy.ReasonBadRequest), fmt.Errorf("proxy: reading the tunnel's first bytes: %w", err))
			return false
		case first.Head != nil:
			t.mu.Lock()
			t.notTLS, t.head = true, first.Head
			t.mu.Unlock()
			if !t.checked(checkPlainHead(t.ex.decision(), first.Head, check, t.ex.port)) {
				return false
			}
		default:
			hello = first.Hello
		}
		pre = buf
	}
	if t.inspecting && hello == nil {
		t.refuse(policy.Denied(policy.ReasonBadRequest), errNotTLSInspected)
		return false
	}
	if hello != nil {
		t.mu.Lock()
		t.hello = hello
		t.mu.Unlock()
		if !t.checked(checkHello(t.ex.decision(), hello, check)) {
			return false
		}
	}
	if t.inspecting {
		t.replay = bytes.Clone(pre) // the pooled buffer goes back now
		return true
	}
	if len(pre) > 0 {
		n, err := up.Write(pre)
		t.sent.Add(int64(n))
		if err != nil {
			t.fail(err)
			t.closeBoth()
			return false
		}
	}
	return true
}

// refuse closes a tunnel whose 200 was already sent: the only way left to
// refuse it. The record carries the denial (unless Revalidate revoked the
// tunnel meanwhile: a denial in force stays, policy.Decision.Then).
func (t *tunnel) refuse(d policy.Decision, err error) {
	t.ex.fold(d)
	t.fail(err)
	t.closeBoth()
}

// checked takes the answer of a check of the client's first message
// (checkHello, checkPlainHead): its decision goes to the exchange, and an
// error refuses the tunnel (false).
func (t *tunnel) checked(d policy.Decision, err error) bool {
	if err != nil {
		t.refuse(d, err)
		return false
	}
	t.ex.fold(d)
	return true
}

func (t *tunnel) setNotTLS() {
	t.mu.Lock()
	t.notTLS = true
	t.mu.Unlock()
}

// peekFirst reads the client's first message: a ClientHello (at most
// sniff.MaxHelloBytes) or a plaintext HTTP request head (at most MaxHeaderBytes).
// The first byte may take as long as the idle timeout (a client may wait
// for the server to speak first); the rest must arrive within PeekTimeout.
// No deadline reset at the end: the relay sets its own at once, and on
// failure the tunnel closes.
func (t *tunnel) peekFirst(pre []byte) ([]byte, sniff.First, error) {
	maxHead := t.p.cfg.MaxHeaderBytes
	return sniff.Read(t.client, append(getHelloBuf(), pre...), sniff.Reading{
		Max:   max(sniff.MaxHelloBytes, maxHead),
		First: t.p.cfg.IdleTimeout,
		Rest:  t.p.cfg.PeekTimeout,
		Idle:  t.idleOn(t.client),
		Got:   t.touch,
	}, func(b []byte) (sniff.First, error) { return sniff.ParseFirst(b, maxHead) })
}

// helloBufs holds the buffers that a client's first message or the
// server's first flight is read into: a ClientHello with a post-quantum key share is about
// 2 KiB, a server's first read a few KiB. They go back before the relay
// starts, so an idle tunnel holds none.
var helloBufs = sync.Pool{New: func() any { b := make([]byte, helloBufSize); return &b }}

const helloBufSize = 8 << 10

func getHelloBuf() []byte { return (*helloBufs.Get().(*[]byte))[:0] }

// putHelloBuf returns b to the pool unless it grew past the pooled size (a
// hostile or odd peer's; the next GC takes it).
func putHelloBuf(b []byte) {
	if cap(b) != helloBufSize {
		return
	}
	b = b[:cap(b)]
	helloBufs.Put(&b)
}
