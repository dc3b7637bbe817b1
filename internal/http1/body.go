package http1

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// requestBody is a request's body as the client framed it. It may be read
// by another goroutine (a Transport's) that outlives the handler: after
// Close a Read fails, and the connection's reader is reused only once the
// body was read to its end (eof), so no read can be in flight on it.
type requestBody struct {
	c       *Conn
	r       io.Reader
	chunked bool
	left    int64 // Content-Length bytes not read yet
	max     int   // bound of a chunked body's trailer section
	expect  bool  // send 100 Continue before the first read

	closed atomic.Bool
	eof    atomic.Bool
	err    error // sticky; only the reading goroutine touches it
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.eof.Load() {
		return 0, io.EOF
	}
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		if err := b.c.writeContinue(); err != nil {
			b.err = err
			return 0, err
		}
	}
	n, err := b.r.Read(p)
	if !b.chunked {
		b.left -= int64(n)
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF
		}
		if b.left == 0 && err == nil {
			err = io.EOF
		}
	} else if err == io.EOF {
		err = b.readTrailer()
	}
	switch {
	case err == io.EOF:
		b.eof.Store(true) // after the last use of the reader
		b.c.watchClient()
	case err != nil:
		b.err = err
	}
	return n, err
}

// readTrailer skips a chunked body's trailer section (RFC 9112 §7.1.2):
// trailers are not forwarded. io.EOF when it ended well.
func (b *requestBody) readTrailer() error {
	n := 0
	for {
		line, err := b.c.br.ReadSlice('\n')
		n += len(line)
		switch {
		case err != nil:
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("http1: chunked trailer: %w", err)
		case n > b.max:
			return fmt.Errorf("http1: chunked trailer over %d bytes", b.max)
		case len(line) == 2 && line[0] == '\r':
			return io.EOF
		}
	}
}

func (b *requestBody) Close() error {
	b.closed.Store(true)
	return nil
}

// writeContinue answers 100 Continue before the body is read (RFC 9110
// §10.1.1), unless the response has begun.
func (c *Conn) writeContinue() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.started {
		return nil
	}
	_, err := io.WriteString(c.c, "HTTP/1.1 100 Continue\r\n\r\n")
	return err
}

// beginRequest arms the watch for a client that leaves: at once when the
// request has no body, else when its body has been read to the end (a
// read of the connection before that would take body bytes).
func (c *Conn) beginRequest(cancel context.CancelFunc, noBody bool) {
	c.bgMu.Lock()
	c.reqCancel, c.bgEnded, c.bgDone = cancel, false, nil
	c.bgGone.Store(false)
	c.started = false
	c.bgMu.Unlock()
	if noBody {
		c.watchClient()
	}
}

// watchClient reads ahead one byte while the request runs: an error (EOF,
// reset) means the client left, and the request's context is cancelled so
// that what it governs (an upstream request) ends too; a byte is the next
// pipelined request and stays buffered.
func (c *Conn) watchClient() {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgEnded || c.bgDone != nil {
		return
	}
	if err := c.c.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	done := make(chan struct{})
	c.bgDone = done
	cancel := c.reqCancel
	go func() {
		defer close(done)
		if _, err := c.br.Peek(1); err != nil && !c.bgAbort.Load() {
			c.bgGone.Store(true)
			cancel()
		}
	}()
}

// endRequest stops the watch and reports whether the client left.
func (c *Conn) endRequest() bool {
	c.bgMu.Lock()
	c.bgEnded = true
	done := c.bgDone
	c.bgMu.Unlock()
	if done != nil {
		c.bgAbort.Store(true)
		_ = c.c.SetReadDeadline(aLongTimeAgo)
		<-done
		c.bgAbort.Store(false)
	}
	return c.bgGone.Load()
}
