package export

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Header is one header the exporter sends with every request
// (--audit-otlp-header K=V). Its value is given inline, or taken from the
// environment (K=env:VAR) or a file (K=file:PATH, read at every request so
// that a rotated Secret applies): a token then never appears in the
// process list.
type Header struct {
	Name string
	// Value is the inline value; unused when Env or File is set.
	Value string
	Env   string
	File  string
}

// ParseHeader parses one --audit-otlp-header value: NAME=VALUE,
// NAME=env:VARIABLE or NAME=file:PATH. An environment variable that is
// unset or empty is an error here, at startup; a file is read (and
// checked) by Value.
func ParseHeader(s string) (Header, error) {
	name, v, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || !validName(name) {
		return Header{}, fmt.Errorf("%w: --audit-otlp-header %q: want NAME=VALUE, NAME=env:VARIABLE or NAME=file:PATH with a header name of letters, digits and -", ErrConfig, redactHeader(s))
	}
	h := Header{Name: http.CanonicalHeaderKey(name)}
	switch {
	case strings.HasPrefix(v, "env:"):
		h.Env = strings.TrimPrefix(v, "env:")
		if os.Getenv(h.Env) == "" {
			return Header{}, fmt.Errorf("%w: --audit-otlp-header %s: environment variable %q is unset or empty", ErrConfig, h.Name, h.Env)
		}
	case strings.HasPrefix(v, "file:"):
		h.File = strings.TrimPrefix(v, "file:")
		if _, err := h.value(); err != nil {
			return Header{}, err
		}
	default:
		h.Value = v
	}
	return h, nil
}

// value returns the header's value now.
func (h Header) value() (string, error) {
	switch {
	case h.Env != "":
		return os.Getenv(h.Env), nil
	case h.File != "":
		b, err := os.ReadFile(h.File)
		if err != nil {
			return "", fmt.Errorf("%w: --audit-otlp-header %s: read %s: %w", ErrConfig, h.Name, h.File, err)
		}
		b = bytes.TrimRight(b, "\r\n")
		if len(b) == 0 || bytes.ContainsAny(b, "\r\n") {
			return "", fmt.Errorf("%w: --audit-otlp-header %s: %s must hold one non-empty line", ErrConfig, h.Name, h.File)
		}
		return string(b), nil
	}
	return h.Value, nil
}

func validName(s string) bool {
	for _, c := range s {
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// redactHeader keeps a header's name and hides its value: an error must
// not carry a token.
func redactHeader(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=…"
	}
	if len(s) > 16 {
		return s[:4] + "…"
	}
	return s
}

// ParseEndpoint checks an --audit-otlp URL: http or https, a host, no
// user information (a token goes in a header), and returns the form that
// is safe to log (no query string).
func ParseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --audit-otlp %q: want the full OTLP/HTTP logs URL, as http://HOST:4318/v1/logs (a Collector) or http://HOST:9428/insert/opentelemetry/v1/logs (VictoriaLogs)", ErrConfig, safeURL(s))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: --audit-otlp: user information in the URL is not accepted: give credentials with --audit-otlp-header Authorization=file:PATH", ErrConfig)
	}
	return u, nil
}

// safeURL is s without user information and query string, for messages.
func safeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
