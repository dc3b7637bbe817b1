package http1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// The request head reader. It is strict where two parsers could disagree
// (RFC 9112): CRLF line ends only (a bare LF or CR is refused), no
// obs-fold, no whitespace between a field name and its colon, no control
// bytes in a value, one Host, one Transfer-Encoding that is exactly
// chunked and never beside a Content-Length, Content-Length as digits
// only (repeated fields must agree), no Transfer-Encoding on HTTP/1.0, at
// most the reader's byte limit (431). These rules are written once, in
// parseHead: ReadHead (the proxy and Host listeners) and CheckHead (heads
// inside inspected tunnels) both apply them.

// Head is one parsed request head. Strings are copies: the buffer the head
// was read into goes back to its pool.
type Head struct {
	Method string
	Target string // request-target as sent
	Minor  int    // HTTP/1.Minor: 0 or 1
	// Header holds every field in order but Host and the captured one
	// (nil for CONNECT, which forwards no field).
	Header http.Header

	Host          string // the Host field's value
	ContentLength int64  // -1 when absent
	Chunked       bool
	Close         bool   // the connection ends after this exchange
	Expect        bool   // Expect: 100-continue
	Upgrade       bool   // an Upgrade field is present
	Captured      string // the first value of the capture field; see ReadHead

	hostField []byte // the Host field's value, a slice of the parsed buffer (CheckHead)
}

// HeadError is a request head that was refused or did not complete: the
// status to answer and, for the record, what could be read of it.
type HeadError struct {
	// Status is 400, 408, 417, 431, 501 or 505; 0 when the client left
	// inside the head (nothing to answer).
	Status int
	Err    error
	// Read so far, for the record: the method when it is a token, the
	// host the target or the Host field names (userinfo and port
	// removed). Never use them for a decision.
	Method, Host string
	// N is the bytes of the head received; 0 for a connection that sent
	// nothing after its last request (no request: no record).
	N int
}

func (e *HeadError) Error() string { return e.Err.Error() }
func (e *HeadError) Unwrap() error { return e.Err }

// headBufs holds the buffers heads are assembled in; one is taken per head
// and returned when it is parsed.
var headBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxBlankLines bounds the empty lines skipped before a request line
// (RFC 9112 §2.2: some clients send a CRLF after a POST body).
const maxBlankLines = 4

// ReadHead reads one request head from br: at most max bytes, request line
// included. The caller sets the read deadline. capture names a field
// addressed to this server (egressd's Egressd-Probe): its first value goes
// to Head.Captured and no value of it to Header; "" captures none.
func ReadHead(br *bufio.Reader, max int, capture string) (*Head, *HeadError) {
	bp := headBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= 64<<10 {
			*bp = buf[:0]
			headBufs.Put(bp)
		}
	}()
	lineStart, blank := 0, 0
	for {
		line, err := br.ReadSlice('\n')
		if len(buf)+len(line) > max {
			buf = append(buf, line[:max-len(buf)]...)
			return nil, partial(buf, http.StatusRequestHeaderFieldsTooLarge,
				fmt.Errorf("%w: over %d bytes", ErrHeadTooLarge, max))
		}
		buf = append(buf, line...)
		switch {
		case err == bufio.ErrBufferFull:
			continue // a line longer than the reader's buffer: read on
		case err != nil:
			if isTimeout(err) {
				return nil, partial(buf, http.StatusRequestTimeout, ErrHeadTimeout)
			}
			return nil, partial(buf, 0, fmt.Errorf("%w: %w", ErrHeadEOF, err))
		}
		l := buf[lineStart:]
		if lineStart == 0 && (len(l) == 2 && l[0] == '\r' || len(l) == 1) && blank < maxBlankLines {
			// An empty line before the request line.
			blank++
			buf = buf[:0]
			continue
		}
		if lineStart > 0 && (len(l) == 2 && l[0] == '\r' || len(l) == 1) {
			break // the empty line that ends the head
		}
		lineStart = len(buf)
	}
	h := &Head{ContentLength: -1}
	if he := parseHead(buf, capture, h, true); he != nil {
		return nil, he
	}
	return h, nil
}

// CheckHead applies ReadHead's rules to a complete head (request line to
// the empty line, included) without building a Head: for a reader that
// parses the head itself afterwards (inspect hands it to net/http). host
// is the Host field's value as sent (nil without one), a slice of head:
// net/http drops the field of an absolute-form request (RFC 9112 §3.2.2),
// and a caller that must hold it to the target's host needs it.
func CheckHead(head []byte) (host []byte, err error) {
	var h Head
	if he := parseHead(head, "", &h, false); he != nil {
		return nil, he
	}
	return h.hostField, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// partial returns the error of an incomplete or refused head with what can
// be read of it.
func partial(buf []byte, status int, err error) *HeadError {
	he := &HeadError{Status: status, Err: err, N: len(buf)}
	he.Method, he.Host = peekHead(buf)
	return he
}

// peekHead returns the method (when it is a token) and the host of a head
// that did not parse: the request-target's authority, else the Host
// field's value; without userinfo and port.
func peekHead(buf []byte) (method, host string) {
	line, rest, _ := bytes.Cut(buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	m, after, ok := bytes.Cut(line, []byte(" "))
	if len(m) > 0 && len(m) <= 24 && isToken(m) {
		method = string(m)
	}
	if ok {
		target, _, _ := bytes.Cut(after, []byte(" "))
		if h := AuthorityHost(string(target), method == http.MethodConnect); h != "" {
			return method, h
		}
	}
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, value, ok := bytes.Cut(bytes.TrimSuffix(l, []byte("\r")), []byte(":"))
		if ok && strings.EqualFold(string(name), "Host") {
			if h := AuthorityHost(string(bytes.TrimSpace(value)), true); h != "" {
				return method, h
			}
		}
	}
	return method, ""
}
