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

// TestRelaySlowReaderNotIdle: the relay's write waits on a destination
// that does not read for longer than the idle timeout, and the source's
// read deadline passes meanwhile. Bytes were moving, so the tunnel is not
// idle: the relay goes on and every byte arrives.
func TestRelaySlowReaderNotIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	tn := &tunnel{p: &Proxy{cfg: Config{IdleTimeout: idle}}}
	tn.touch()
	srcPeer, src := tcpPair(t)
	dst, dstPeer := tcpPair(t)
	if err := dst.SetWriteBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	if err := dstPeer.SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	go func() {
		srcPeer.Write(payload)
		srcPeer.CloseWrite()
	}()
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		err := tn.relay(dst, src, &n)
		dst.CloseWrite()
		done <- err
	}()
	// The relay fills dst's buffers and waits in a write; nobody reads
	// for twice the idle timeout.
	for n.Load() == 0 {
		runtime.Gosched()
	}
	time.Sleep(2 * idle)
	got, err := io.ReadAll(dstPeer)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("relay: %v (a write waiting on a slow reader is not idleness)", err)
	}
	if !bytes.Equal(got, payload) || n.Load() != int64(len(payload)) {
		t.Fatalf("relayed %d bytes, counted %d, want %d", len(got), n.Load(), len(payload))
	}
}
