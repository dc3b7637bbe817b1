package proxy

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln := listen(t, "127.0.0.1:0")
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// unixGetRcvbuf returns c's SO_RCVBUF.
func unixGetRcvbuf(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil {
		return 0, err
	}
	return v, gerr
}

// inQueue returns the bytes queued for reading on c (SIOCINQ).
func inQueue(t *testing.T, c *net.TCPConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var q int
	var qerr error
	if err := rc.Control(func(fd uintptr) { q, qerr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if qerr != nil {
		t.Fatal(qerr)
	}
	return q
}

// TestRelaySpliceDeadlineExtends: the read deadline of the source passes
// while splice waits for a slow destination. That is an idle decision like
// a timeout of the poller's wait (the tunnel moved bytes, so the deadline
// moves), not an error that ends the tunnel.
func TestRelaySpliceDeadlineExtends(t *testing.T) {
	tn := &tunnel{p: &Proxy{cfg: Config{IdleTimeout: time.Hour}}}
	tn.touch()
	srcPeer, src := tcpPair(t)
	dst, dstPeer := tcpPair(t)
	// A destination slower than the source, so that splice waits on it.
	if err := dst.SetWriteBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	if err := dstPeer.SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	// ReadFrom checks the source's deadline again only when one pipe
	// (1 MiB) did not take the whole queue: more than that must be queued.
	if err := src.SetReadBuffer(8 << 20); err != nil {
		t.Fatal(err)
	}
	if rb, err := unixGetRcvbuf(src); err != nil || rb < 4<<20 {
		t.Skipf("receive buffer %d (%v): net.core.rmem_max too small to queue over 1 MiB", rb, err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB
	go func() {
		srcPeer.Write(payload)
		srcPeer.CloseWrite()
	}()
	// The relay reads one full burst (16 KiB), then splices the rest of the
	// queue in one ReadFrom that needs a second round of its pipe.
	const queued = 1<<20 + 64<<10
	for inQueue(t, src) < queued {
		runtime.Gosched()
	}
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		err := tn.relay(dst, src, &n)
		dst.Close() // a relay that failed ends the reads below
		done <- err
	}()

	// A spliced byte has come while the counter still shows only the first
	// burst: the relay is inside that ReadFrom, in its first round, waiting
	// on dst. Let the source's deadline pass there.
	got := make([]byte, 0, len(payload))
	chunk := make([]byte, 1024)
	for len(got) <= smallBurst {
		k, err := dstPeer.Read(chunk)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, chunk[:k]...)
	}
	if c := n.Load(); c != smallBurst {
		t.Fatalf("relay counted %d bytes, want one burst of %d before the splice", c, smallBurst)
	}
	if err := src.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, len(payload)-len(got))
	if _, err := io.ReadFull(dstPeer, rest); err != nil {
		t.Fatalf("after %d bytes: %v; relay: %v", len(got), err, <-done)
	}
	if err := <-done; err != nil {
		t.Fatalf("relay: %v", err)
	}
	if !bytes.Equal(append(got, rest...), payload) || n.Load() != int64(len(payload)) {
		t.Fatalf("relayed %d bytes, counted %d, want %d", len(got)+len(rest), n.Load(), len(payload))
	}
}
