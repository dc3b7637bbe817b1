package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// The request head reader of the proxy and Host listeners. egressd reads
// request heads itself instead of through net/http's server for two
// reasons: every head gets its audit record, including one that never
// completes (a slowloris client) or that a parser refuses, with what was
// parsed of it (net/http answers those itself, before any handler, and
// closes a timed-out head without a word); and a CONNECT needs none of
// net/http's per-connection machinery (its buffered writer, background
// read, contexts and timers), which was a large part of a new tunnel's
// cost.
//
// It is strict where two parsers could disagree (RFC 9112): CRLF line ends
// only (a bare LF or CR is refused), no obs-fold, no whitespace between a
// field name and its colon, no control bytes in a value, one Host, one
// Transfer-Encoding that is exactly chunked and never beside a
// Content-Length, Content-Length as digits only (repeated fields must
// agree), no Transfer-Encoding on HTTP/1.0. Plain HTTP requests are
// forwarded re-framed by egressd, so nothing the client wrote about framing
// reaches an origin.

// requestHead is one parsed request head. Strings are copies: the buffer
// the head was read into goes back to its pool.
type requestHead struct {
	method string
	target string // request-target as sent
	minor  int    // HTTP/1.minor: 0 or 1
	// fields holds every header field in order, for plain HTTP (nil for
	// CONNECT, which forwards no header).
	fields http.Header

	host          string // the Host field's value
	hostCount     int
	contentLength int64 // -1 when absent
	chunked       bool
	close         bool // the connection ends after this exchange
	expect        bool // Expect: 100-continue
	upgrade       bool // Upgrade field present
	probe         string
}

// headError is a request head that is refused: the status to answer and,
// for the record, what was parsed before the error.
type headError struct {
	status int // 400, 408, 431, 501 or 505; 0: the client left, no answer
	err    error
	// Parsed so far, for the record (method only when it is a token).
	method, host string
	// bytes of the head received; 0 for a connection that sent nothing
	// after its last request (no request: no record).
	n int
}

func (e *headError) Error() string { return e.err.Error() }
func (e *headError) Unwrap() error { return e.err }

// Errors of the head reader.
var (
	errHeadTooLarge = errors.New("proxy: request head too large")
	errHeadTimeout  = errors.New("proxy: request head incomplete at the header timeout")
	errHeadEOF      = errors.New("proxy: connection closed inside a request head")
	errMalformedReq = errors.New("proxy: malformed request head")
)

// headBufs holds the buffers heads are assembled in; one is taken per head
// and returned when it is parsed.
var headBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxBlankLines bounds the empty lines skipped before a request line
// (RFC 9112 §2.2: some clients send a CRLF after a POST body).
const maxBlankLines = 4

// readHead reads one request head from br: at most max bytes, request line
// included. The caller sets the read deadline.
func readHead(br *bufio.Reader, max int) (*requestHead, *headError) {
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
				fmt.Errorf("%w: over %d bytes", errHeadTooLarge, max))
		}
		buf = append(buf, line...)
		switch {
		case err == bufio.ErrBufferFull:
			continue // a line longer than the reader's buffer: read on
		case err != nil:
			if isTimeout(err) {
				return nil, partial(buf, http.StatusRequestTimeout, errHeadTimeout)
			}
			he := partial(buf, 0, fmt.Errorf("%w: %w", errHeadEOF, err))
			return nil, he
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
	h, err := parseHead(buf)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// partial returns the error of an incomplete or refused head with what can
// be read of it.
func partial(buf []byte, status int, err error) *headError {
	he := &headError{status: status, err: err, n: len(buf)}
	he.method, he.host = peekHead(buf)
	return he
}

// peekHead returns the method (when it is a token) and the host of a head
// that did not parse: the request-target's authority, else the Host
// field's value; truncated and without userinfo.
func peekHead(buf []byte) (method, host string) {
	line, rest, _ := bytes.Cut(buf, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	m, after, ok := bytes.Cut(line, []byte(" "))
	if len(m) > 0 && len(m) <= 24 && isToken(m) {
		method = string(m)
	}
	if ok {
		target, _, _ := bytes.Cut(after, []byte(" "))
		if h := authorityHost(string(target), method == http.MethodConnect); h != "" {
			return method, truncate(h, maxHostLen)
		}
	}
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, value, ok := bytes.Cut(bytes.TrimSuffix(l, []byte("\r")), []byte(":"))
		if ok && strings.EqualFold(string(name), "Host") {
			if h := authorityHost(string(bytes.TrimSpace(value)), true); h != "" {
				return method, truncate(h, maxHostLen)
			}
		}
	}
	return method, ""
}

// authorityHost returns the host of an absolute URI's authority, or of an
// authority (bare, when bare): userinfo, port and brackets removed. It is
// for records of refused heads only, never for a decision.
func authorityHost(s string, bare bool) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	} else if !bare {
		return ""
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if h, _, err := requestHost(s, 0); err == nil {
		return h
	}
	return s
}

// parseHead parses a complete head (request line to the empty line, CRLF
// line ends).
func parseHead(buf []byte) (*requestHead, *headError) {
	bad := func(status int, format string, args ...any) (*requestHead, *headError) {
		return nil, partial(buf, status, fmt.Errorf("%w: "+format, append([]any{errMalformedReq}, args...)...))
	}
	for i, c := range buf {
		// CR only before LF, LF only after CR (RFC 9112 §2.2: a bare CR
		// must be refused; a bare LF is refused too, so that no parser
		// downstream ever sees a line end egressd did not).
		if c == '\r' && (i+1 == len(buf) || buf[i+1] != '\n') || c == '\n' && (i == 0 || buf[i-1] != '\r') {
			return bad(http.StatusBadRequest, "bare CR or LF")
		}
	}
	line, rest, _ := bytes.Cut(buf, []byte("\r\n"))
	m, line, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || len(m) == 0 || !isToken(m) || len(target) == 0 {
		return bad(http.StatusBadRequest, "request line")
	}
	for _, c := range target {
		if c <= ' ' || c == 0x7f {
			// No control byte, no second space. Bytes over 0x7f pass
			// (RFC 9112 §3.2 wants ASCII, net/http takes UTF-8): a
			// name in full-width letters is then decided, and refused,
			// as the metadata name it maps to, not as a bad request.
			return bad(http.StatusBadRequest, "request-target")
		}
	}
	h := &requestHead{method: methodString(m), contentLength: -1}
	switch string(proto) {
	case "HTTP/1.1":
		h.minor = 1
	case "HTTP/1.0":
	default:
		if len(proto) == 8 && bytes.HasPrefix(proto, []byte("HTTP/")) && isDigit(proto[5]) && proto[6] == '.' && isDigit(proto[7]) {
			return bad(http.StatusHTTPVersionNotSupported, "version %q", proto)
		}
		return bad(http.StatusBadRequest, "version")
	}
	h.target = string(target)
	connect := h.method == http.MethodConnect
	if !connect {
		h.fields = make(http.Header, 8)
	}
	var te, cl int
	closeTok, keepAlive := false, false
	for len(rest) > 2 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if l[0] == ' ' || l[0] == '\t' {
			return bad(http.StatusBadRequest, "obs-fold") // RFC 9112 §5.2
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || len(name) == 0 || !isToken(name) {
			// Also "Name : value" (RFC 9112 §5.1: must be refused).
			return bad(http.StatusBadRequest, "header field name")
		}
		value = trimOWS(value)
		for _, c := range value {
			if c < ' ' && c != '\t' || c == 0x7f {
				return bad(http.StatusBadRequest, "control byte in %q", name)
			}
		}
		switch {
		case asciiEqualFold(name, "Host"):
			h.hostCount++
			if h.hostCount > 1 {
				return bad(http.StatusBadRequest, "more than one Host")
			}
			if !httpguts.ValidHostHeader(string(value)) {
				return bad(http.StatusBadRequest, "Host")
			}
			h.host = string(value)
			continue // not a field of Header, as in net/http
		case asciiEqualFold(name, "Content-Length"):
			n, ok := parseContentLength(value)
			if !ok || cl > 0 && n != h.contentLength {
				return bad(http.StatusBadRequest, "Content-Length")
			}
			cl++
			h.contentLength = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			te++
			if te > 1 || !asciiEqualFold(value, "chunked") {
				return bad(http.StatusNotImplemented, "Transfer-Encoding %q", value)
			}
			h.chunked = true
		case asciiEqualFold(name, "Connection"):
			for _, tok := range bytes.Split(value, []byte(",")) {
				tok = trimOWS(tok)
				switch {
				case asciiEqualFold(tok, "close"):
					closeTok = true
				case asciiEqualFold(tok, "keep-alive"):
					keepAlive = true
				}
			}
		case asciiEqualFold(name, "Expect"):
			if !asciiEqualFold(value, "100-continue") {
				return bad(http.StatusExpectationFailed, "Expect %q", value)
			}
			h.expect = true
		case asciiEqualFold(name, "Upgrade"):
			h.upgrade = true
		case asciiEqualFold(name, probeHeader):
			if h.probe == "" {
				h.probe = sanitizeProbe(value)
			}
			continue // never forwarded
		}
		if h.fields != nil {
			k := http.CanonicalHeaderKey(string(name))
			h.fields[k] = append(h.fields[k], string(value))
		}
	}
	if te > 0 && cl > 0 {
		// RFC 9112 §6.1 lets a server drop the Content-Length; refusing
		// leaves no room for a parser that reads the other one.
		return bad(http.StatusBadRequest, "both Content-Length and Transfer-Encoding")
	}
	if te > 0 && h.minor == 0 {
		return bad(http.StatusBadRequest, "Transfer-Encoding in HTTP/1.0") // RFC 9112 §6.1
	}
	if h.hostCount == 0 && h.minor == 1 && !connect {
		return bad(http.StatusBadRequest, "missing Host") // RFC 9112 §3.2
	}
	// HTTP/1.0 closes unless the client asked to keep alive (RFC 9112 §9.3).
	h.close = closeTok || h.minor == 0 && !keepAlive
	return h, nil
}

// probeHeader marks a request made by egressd probe; its value is recorded
// as probe and never forwarded.
const probeHeader = "Egressd-Probe"

// maxProbeLen bounds a recorded probe name.
const maxProbeLen = 64

// sanitizeProbe keeps a probe name recordable: at most maxProbeLen bytes of
// letters, digits and . _ - / : (others become _).
func sanitizeProbe(v []byte) string {
	if len(v) > maxProbeLen {
		v = v[:maxProbeLen]
	}
	b := make([]byte, len(v))
	for i, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-', c == '/', c == ':':
			b[i] = c
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// methodString returns the method, without allocating for the common ones.
func methodString(m []byte) string {
	switch string(m) {
	case http.MethodConnect:
		return http.MethodConnect
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodPatch:
		return http.MethodPatch
	}
	return string(m)
}

// parseContentLength accepts 1*DIGIT (RFC 9110 §8.6): no sign, no list.
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isToken(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return len(b) > 0
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// connectTarget returns the host and port of a CONNECT request-target. The
// target is an authority (RFC 9110 §9.3.6); absolute says it was given as
// an absolute URI instead ("http://169.254.169.254:443/"): its authority is
// returned so that the record and the decision name the host it names, and
// the request is refused as malformed whatever the decision.
func connectTarget(target string) (host string, port int, absolute bool, err error) {
	if i := strings.Index(target, "://"); i > 0 {
		absolute = true
		target = target[i+3:]
		if j := strings.IndexAny(target, "/?#"); j >= 0 {
			target = target[:j]
		}
	}
	if strings.ContainsAny(target, "@%/?#\\") {
		// Userinfo, percent-encoding (an IPv6 zone) or a path: parse as
		// net/http does, so that the host decided is the host a URL
		// parser sees ("a@b:443" is b).
		u, perr := url.ParseRequestURI("http://" + target)
		if perr != nil {
			return authorityHost(target, true), 0, absolute, perr
		}
		target = u.Host
	}
	host, port, err = requestHost(target, 0)
	if err == nil && port == 0 {
		err = errors.New("CONNECT target needs a port")
	}
	return host, port, absolute, err
}

// statusText is the reason phrase for a status line.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "status " + strconv.Itoa(code)
}
