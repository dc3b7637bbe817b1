package inspect

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/egressd/egressd/internal/http1"
)

// The proxy's per-request limits, applied to each request inside an
// inspected tunnel (docs/design.md, "Inspection"): the head's size (431)
// and time (408) on HTTP/1.1, the header list's size (431) and the
// concurrent streams on HTTP/2, the origin's response header time (504)
// and a response that moves no byte for the idle timeout (cut, outcome
// idle-timeout) on both.

var (
	// errHeaderListTooLarge: an HTTP/2 header list over
	// Config.MaxHeadBytes.
	errHeaderListTooLarge = errors.New("inspect: request header list too large")
	// errResponseTimeout: no response header from the origin within
	// Config.ResponseHeaderTimeout.
	errResponseTimeout = errors.New("inspect: no response header from the origin within the response timeout")
)

// headLimit is the origin's connection as an HTTP/1.1 tunnel's response
// reader reads it: between hold and release each read is held to what is
// left of n bytes, and one past them fails with
// http1.ErrResponseHeadTooLarge, so that no origin makes the tunnel hold
// more than n bytes of a head (net/http's ReadResponse reads a head of
// any size; its Transport's MaxResponseHeaderBytes works the same way, on
// its own connection). Bytes of the body the reader buffered with the
// head count too: the limit errs low by a buffer at most. Trailers need
// no hold: net/http reads them only when they fit the reader's buffer.
type headLimit struct {
	r      io.Reader
	n, max int64
	held   bool
}

func (l *headLimit) hold(n int) { l.n, l.max, l.held = int64(n), int64(n), true }
func (l *headLimit) release()   { l.held = false }

func (l *headLimit) Read(p []byte) (int, error) {
	if !l.held {
		return l.r.Read(p)
	}
	if l.n <= 0 {
		return 0, fmt.Errorf("%w: the origin's is over %d bytes", http1.ErrResponseHeadTooLarge, l.max)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// h2HeadTooLarge reports whether err is x/net/http2's for a response
// header list over the MaxHeaderListSize it advertised (the error is not
// exported: matched by its text, which TestH2HeadTooLargeText holds).
func h2HeadTooLarge(err error) bool {
	return err != nil && strings.Contains(err.Error(), "response header list larger than advertised limit")
}

// h2HeadWatch is the origin's side of an HTTP/2 tunnel as x/net reads it:
// it follows the frame boundaries (RFC 9113 §4.1) and keeps the encoded
// size of the last header block (HEADERS and its CONTINUATION frames).
// x/net answers a header list a little over its limit with the error
// h2HeadTooLarge matches, and one far over it by closing the connection
// in the middle of the block (PROTOCOL_ERROR, or COMPRESSION_ERROR for one
// field over it), errors that name no cause: a connection error after a
// block of more than half the limit encoded (HPACK's Huffman codes are 5
// bits at the shortest, so a block over the limit decoded is mostly over
// half of it encoded) is taken for one. A flood of fields indexed from
// HPACK's table stays short encoded and keeps x/net's words; either way
// the connection holds no more than the limit. It reads frame headers
// only, never a payload.
type h2HeadWatch struct {
	net.Conn
	max   int64
	hdr   [9]byte
	nh    int   // bytes of hdr read so far
	skip  int64 // payload bytes left of the current frame
	block atomic.Int64
}

func (w *h2HeadWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.scan(p[:n])
	return n, err
}

func (w *h2HeadWatch) scan(b []byte) {
	for len(b) > 0 {
		if w.skip > 0 {
			k := min(int64(len(b)), w.skip)
			w.skip -= k
			b = b[k:]
			continue
		}
		k := copy(w.hdr[w.nh:], b)
		w.nh += k
		b = b[k:]
		if w.nh < len(w.hdr) {
			return
		}
		w.nh = 0
		w.skip = int64(w.hdr[0])<<16 | int64(w.hdr[1])<<8 | int64(w.hdr[2])
		switch http2.FrameType(w.hdr[3]) {
		case http2.FrameHeaders:
			w.block.Store(w.skip)
		case http2.FrameContinuation:
			w.block.Add(w.skip)
		}
	}
}

// headClass returns err, from a stream of the HTTP/2 connection w
// watches, as http1.ErrResponseHeadTooLarge when a response head over the
// limit caused it.
func (w *h2HeadWatch) headClass(err error) error {
	if err == nil {
		return nil
	}
	var ce http2.ConnectionError
	if h2HeadTooLarge(err) || errors.As(err, &ce) && w.block.Load() > w.max/2 {
		return fmt.Errorf("%w: the origin's header list is over %d bytes", http1.ErrResponseHeadTooLarge, w.max)
	}
	return err
}

// headStatus is the answer to an HTTP/1.1 head that could not be read:
// 431 over the size limit, 408 at the header timeout, else 400 (as the
// proxy's head reader answers them).
func headStatus(err error) int {
	switch {
	case errors.Is(err, http1.ErrHeadTooLarge): // over Config.MaxHeadBytes
		return http.StatusRequestHeaderFieldsTooLarge
	case isTimeout(err):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// upstreamStatus is the answer to a request the origin did not answer:
// 504 at the response timeout, else 502 (as on the plain-HTTP path).
func upstreamStatus(err error) int {
	if errors.Is(err, errResponseTimeout) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// responseTimedOut marks err, from reading a response header under the
// ResponseHeaderTimeout deadline, as errResponseTimeout when it is the
// deadline's.
func responseTimedOut(err error) error {
	if isTimeout(err) {
		return fmt.Errorf("%w: %w", errResponseTimeout, err)
	}
	return err
}

// h2HeaderListCap is the SETTINGS_MAX_HEADER_LIST_SIZE basis given to
// x/net/http2's server for a limit of n bytes: twice the limit, so that
// a header list between n and 2n reaches the handler, which answers it
// 431 with X-Egressd-Reason and a record (x/net answers a longer one 431
// itself, and no handler sees it).
func h2HeaderListCap(n int) int { return 2 * n }

// headerListSize is a request's HTTP/2 header list size (RFC 9113
// §6.5.2: name, value and 32 bytes per field, pseudo-fields included).
func headerListSize(req *http.Request) int {
	n := len(":method") + len(req.Method) + len(":path") + len(req.RequestURI) +
		len(":authority") + len(req.Host) + len(":scheme") + len("https") + 4*32
	for k, vs := range req.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 32
		}
	}
	return n
}

// refuseH2 answers a stream egressd refuses before deciding it (its header
// list over the limit) and records it; the tunnel stays up.
func (s *session[D]) refuseH2(w http.ResponseWriter, req *http.Request, status int, reason string, err error) {
	s.countRequest()
	x := ExchangeRecord[D]{Start: time.Now(), Method: req.Method, Proto: "HTTP/2.0", Status: status,
		Verdict: Verdict[D]{Reason: reason}, Error: err.Error()}
	writeRefusalH2(w, status, reason, s.a.Host)
	s.record(x)
}

// writeRefusalH2 writes egressd's own response to one HTTP/2 stream.
func writeRefusalH2(w http.ResponseWriter, status int, reason, host string) {
	http1.SetRefusalHeader(w.Header(), reason)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, refusalBody(status, reason, host))
}

// refusalBody is the one-line body of egressd's own response inside the
// tunnel, on either protocol.
func refusalBody(status int, reason, host string) string {
	return "egressd: " + http.StatusText(status) + " for " + host + " inside an inspected tunnel: " + reason + "\n"
}

// countH2Error is x/net/http2's Server.CountError: a stream it resets for
// exceeding the concurrent streams egressd advertised is recorded as a
// refused request (reason rate-limited, no status: HTTP/2 answers it with
// RST_STREAM, RFC 9113 §5.1.2). x/net names it
// "stream_<code>_over_max_streams" (or "..._over_max_streams_race").
func (s *session[D]) countH2Error(kind string) {
	if !strings.Contains(kind, "_over_max_streams") {
		return
	}
	s.countRequest()
	s.record(ExchangeRecord[D]{Start: time.Now(), Proto: "HTTP/2.0", Verdict: Verdict[D]{Reason: reasonRateLimited},
		Error: fmt.Sprintf("stream over the %d concurrent streams advertised: reset", s.e.cfg.MaxConcurrentStreams)})
}

// reasonRateLimited is policy.ReasonRateLimited (this package imports no
// policy): the reason of a stream over the concurrent streams limit.
const reasonRateLimited = "rate-limited"

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// idleBody is an origin's response body inside an HTTP/1.1 tunnel: its
// reads keep the origin's read deadline and the client's write deadline
// IdleTimeout ahead, so that a response that moves no byte either
// way for that long ends (as the plain path's idle watch ends one). A read
// that must wait for the origin (ubr holds nothing) first flushes what cw
// holds, so that a streamed response (server-sent events) reaches the
// client as it comes, as on HTTP/2.
type idleBody struct {
	countReader
	idle             time.Duration // Config.IdleTimeout
	client, upstream *tls.Conn
	ubr              *bufio.Reader
	cw               *bufio.Writer
	set              time.Time // when the deadlines were last moved on
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.ubr.Buffered() == 0 && b.cw.Buffered() > 0 {
		if err := b.cw.Flush(); err != nil {
			return 0, err
		}
	}
	// The deadlines move on at most every eighth of the idle timeout
	// (two timer updates per read cost a tenth of a busy tunnel's
	// throughput): a response still moving bytes always has more than
	// seven eighths of it left. An error here shows on the read or write
	// that follows.
	idle := b.idle
	if now := time.Now(); now.Sub(b.set) > idle/8 {
		b.set = now
		t := now.Add(idle)
		_ = b.upstream.SetReadDeadline(t)
		_ = b.client.SetWriteDeadline(t)
	}
	return b.countReader.Read(p)
}

// done clears the deadlines the body set, once the response is relayed.
func (b *idleBody) done() error {
	if err := b.upstream.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	return b.client.SetWriteDeadline(time.Time{})
}
