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

// SetRefusalHeader sets the reason and refusalFields on h, for responses a
// ResponseWriter frames (net/http, HTTP/2).
func SetRefusalHeader(h http.Header, reason string) {
	h.Set("X-Egressd-Reason", reason)
	for _, f := range refusalFields {
		h.Set(f[0], f[1])
	}
}

// AppendRefusal appends a whole HTTP/1.1 response of egressd's own: the
// reason, refusalFields, Connection: close when the connection closes
// after it, and body with its length.
func AppendRefusal(b []byte, status int, reason, body string, close bool) []byte {
	b = AppendStatusLine(b, status)
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
