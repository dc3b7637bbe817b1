package http1

import (
	"bytes"
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// parseHead parses a complete head (request line to the empty line) into
// h. build false only checks: no string, no Header (CheckHead).
func parseHead(buf []byte, capture string, h *Head, build bool) *HeadError {
	bad := func(status int, format string, args ...any) *HeadError {
		return partial(buf, status, fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...))
	}
	for i, c := range buf {
		// CR only before LF, LF only after CR (RFC 9112 §2.2: a bare CR
		// must be refused; a bare LF is refused too, so that no parser
		// downstream ever sees a line end this one did not).
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
	h.Method, h.ContentLength = methodString(m), -1
	switch string(proto) {
	case "HTTP/1.1":
		h.Minor = 1
	case "HTTP/1.0":
	default:
		if len(proto) == 8 && bytes.HasPrefix(proto, []byte("HTTP/")) && isDigit(proto[5]) && proto[6] == '.' && isDigit(proto[7]) {
			return bad(http.StatusHTTPVersionNotSupported, "version %q", proto)
		}
		return bad(http.StatusBadRequest, "version")
	}
	connect := h.Method == http.MethodConnect
	if build {
		h.Target = string(target)
		if !connect {
			h.Header = make(http.Header, 8)
		}
	}
	var te, cl, hosts int
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
			hosts++
			if hosts > 1 {
				return bad(http.StatusBadRequest, "more than one Host")
			}
			if !httpguts.ValidHostHeader(string(value)) {
				return bad(http.StatusBadRequest, "Host")
			}
			h.hostField = value
			if build {
				h.Host = string(value)
			}
			continue // not a field of Header, as in net/http
		case asciiEqualFold(name, "Content-Length"):
			n, ok := parseContentLength(value)
			if !ok || cl > 0 && n != h.ContentLength {
				return bad(http.StatusBadRequest, "Content-Length")
			}
			cl++
			h.ContentLength = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			te++
			if te > 1 || !asciiEqualFold(value, "chunked") {
				return bad(http.StatusNotImplemented, "Transfer-Encoding %q", value)
			}
			h.Chunked = true
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
			h.Expect = true
		case asciiEqualFold(name, "Upgrade"):
			h.Upgrade = true
		case capture != "" && asciiEqualFold(name, capture):
			if build && h.Captured == "" {
				h.Captured = string(value)
			}
			continue // addressed to this server: never in Header
		}
		if build && h.Header != nil {
			k := http.CanonicalHeaderKey(string(name))
			h.Header[k] = append(h.Header[k], string(value))
		}
	}
	if te > 0 && cl > 0 {
		// RFC 9112 §6.1 lets a server drop the Content-Length; refusing
		// leaves no room for a parser that reads the other one.
		return bad(http.StatusBadRequest, "both Content-Length and Transfer-Encoding")
	}
	if te > 0 && h.Minor == 0 {
		return bad(http.StatusBadRequest, "Transfer-Encoding in HTTP/1.0") // RFC 9112 §6.1
	}
	if hosts == 0 && h.Minor == 1 && !connect {
		return bad(http.StatusBadRequest, "missing Host") // RFC 9112 §3.2
	}
	// HTTP/1.0 closes unless the client asked to keep alive (RFC 9112 §9.3).
	h.Close = closeTok || h.Minor == 0 && !keepAlive
	return nil
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

// asciiEqualFold compares b with s, folding ASCII letters only (net/http's
// rule: "chun\u212Aed", with a Kelvin sign, is not chunked).
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
