package http1

import (
	"net/http"
	"strconv"
)

// refusalFields are the fields of every response egressd answers itself
// instead of an origin (a refusal, an upstream failure), beside
// X-Egressd-Reason: a plain-text body that is never sniffed or cached.
var refusalFields = [...][2]string{
	{"Content-Type", "text/plain; charset=utf-8"},
	{"X-Content-Type-Options", "nosniff"},
	{"Cache-Control", "no-store"},
}

// AppendReasonPhrase appends the reason phrase of a status line: the
// status text and, when reason is not empty, "(egressd: REASON)" — the
// words of X-Egressd-Reason, in the one place many clients print: Go's
// proxyconnect error, python's "Tunnel connection failed: 403 Forbidden
// (egressd: not-allowlisted)", wget's "Proxy tunneling failed". Bytes a
// reason phrase may not hold (RFC 9112 §4: HTAB, SP, VCHAR) are left out;
// egressd's reasons and outcomes are lower-case words and hyphens.
func AppendReasonPhrase(b []byte, code int, reason string) []byte {
	if t := http.StatusText(code); t != "" {
		b = append(b, t...)
	} else {
		b = append(b, "status "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	if reason == "" {
		return b
	}
	b = append(b, " (egressd: "...)
	for i := 0; i < len(reason); i++ {
		if c := reason[i]; c > ' ' && c < 0x7f {
			b = append(b, c)
		}
	}
	return append(b, ')')
}

// SetRefusal sets the reason and refusalFields on w's header and, when w
// is (or unwraps to) this package's ResponseWriter, the reason phrase of
// its status line (AppendReasonPhrase). A ResponseWriter of HTTP/2 has no
// reason phrase: the body says it there.
func SetRefusal(w http.ResponseWriter, reason string) {
	SetRefusalHeader(w.Header(), reason)
	for w != nil {
		if rw, ok := w.(*ResponseWriter); ok {
			rw.reason = reason
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

// SetRefusalHeader sets the reason and refusalFields on h, for responses a
// ResponseWriter frames (net/http, HTTP/2).
func SetRefusalHeader(h http.Header, reason string) {
	h.Set("X-Egressd-Reason", reason)
	for _, f := range refusalFields {
		h.Set(f[0], f[1])
	}
}

// AppendRefusal appends a whole HTTP/1.1 response of egressd's own: the
// reason (in the reason phrase and X-Egressd-Reason), refusalFields,
// Connection: close when the connection closes after it, and body with its
// length.
func AppendRefusal(b []byte, status int, reason, body string, close bool) []byte {
	b = appendStatusLine(b, status, reason)
	b = append(b, "X-Egressd-Reason: "...)
	b = append(b, reason...)
	b = append(b, "\r\n"...)
	for _, f := range refusalFields {
		b = append(append(append(append(b, f[0]...), ": "...), f[1]...), "\r\n"...)
	}
	if close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}
