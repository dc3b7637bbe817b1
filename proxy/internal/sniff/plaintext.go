package sniff

import (
	"bufio"
	"bytes"
	"fmt"
	"net/textproto"
	"net/url"
	"strings"
)

// A CONNECT tunnel whose first bytes are a plaintext HTTP request is
// checked like a TLS one: the SNI of HTTP is Host. Without the check, a
// CONNECT to an allowed name on a shared address (a CDN, a virtual-hosting
// front) followed by "Host: other.site" would reach any site behind it.

// HTTPHead is what egressd reads of a plaintext HTTP request head.
type HTTPHead struct {
	Method string
	// Authority is the request target's authority in absolute form
	// (RFC 9112 §3.2.2: a server then ignores Host) or authority form
	// (CONNECT); empty in origin form.
	Authority string
	// Hosts are the values of every Host field; none for HTTP/0.9.
	Hosts []string
}

// ParseHTTPHead reads a plaintext HTTP request head at the start of b
// (RFC 9112 §2-§5). It answers ErrNotHTTP as soon as b cannot be the start
// of a request line, ErrNeedMore while it can be and the head is not
// complete, and ErrBadHead (wrapped) for a head over limit bytes or one
// whose fields do not parse. The classification errs towards HTTP: a
// request line is a token, whitespace, and either a target and an
// HTTP-version or (HTTP/0.9) a path alone; leading empty lines are skipped
// as servers do (RFC 9112 §2.2). Other client-first protocols (SMTP's
// "EHLO name", an SSH banner) are not HTTP and pass unchecked.
func ParseHTTPHead(b []byte, limit int) (HTTPHead, error) {
	rest := bytes.TrimLeft(b, "\r\n")
	more := func() (HTTPHead, error) {
		if len(b) >= limit {
			return HTTPHead{}, fmt.Errorf("%w: HTTP head over %d bytes", ErrBadHead, limit)
		}
		return HTTPHead{}, ErrNeedMore
	}
	i := 0
	for i < len(rest) && isTokenByte(rest[i]) {
		i++
	}
	switch {
	case len(rest) == 0 || i == len(rest):
		return more()
	case i == 0 || rest[i] != ' ' && rest[i] != '\t':
		return HTTPHead{}, ErrNotHTTP
	}
	eol := bytes.IndexByte(rest, '\n')
	if eol < 0 {
		return more()
	}
	fields := strings.Fields(string(rest[:eol]))
	h := HTTPHead{Method: fields[0]}
	versioned := false
	for _, f := range fields[1:] {
		if len(f) >= 5 && strings.EqualFold(f[:5], "HTTP/") {
			versioned = true
		}
	}
	switch {
	case versioned && len(fields) >= 3:
		h.Authority = targetAuthority(h.Method, fields[1])
	case versioned:
		return HTTPHead{}, fmt.Errorf("%w: HTTP request line without a target", ErrBadHead)
	case len(fields) == 2 && (strings.HasPrefix(fields[1], "/") || strings.Contains(fields[1], "://")):
		// HTTP/0.9 (a method and a path, no version, no header section):
		// the server picks its default site, whatever that is. No Host
		// names the CONNECT host, so the check refuses it.
		h.Authority = targetAuthority(h.Method, fields[1])
		return h, nil
	default:
		return HTTPHead{}, ErrNotHTTP
	}
	// The header section ends at the first empty line.
	pos := eol + 1
	for {
		nl := bytes.IndexByte(rest[pos:], '\n')
		if nl < 0 {
			return more()
		}
		line := bytes.TrimSuffix(rest[pos:pos+nl], []byte("\r"))
		pos += nl + 1
		if len(line) == 0 {
			break
		}
	}
	if len(b)-len(rest)+pos > limit {
		return HTTPHead{}, fmt.Errorf("%w: HTTP head over %d bytes", ErrBadHead, limit)
	}
	hdr, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(rest[eol+1 : pos]))).ReadMIMEHeader()
	if err != nil {
		return HTTPHead{}, fmt.Errorf("%w: HTTP header: %w", ErrBadHead, err)
	}
	h.Hosts = hdr.Values("Host")
	// "Host :" is no Host field (RFC 9112 §5.1 wants a 400 for it), but a
	// lenient server may read it as one: it is checked like one.
	for k, v := range hdr {
		if k != "Host" && strings.EqualFold(strings.TrimSpace(k), "Host") {
			h.Hosts = append(h.Hosts, v...)
		}
	}
	return h, nil
}

// targetAuthority returns the authority of a request target in absolute
// form, or the target itself in authority form (CONNECT); "" otherwise.
func targetAuthority(method, target string) string {
	if method == "CONNECT" {
		return target
	}
	if !strings.Contains(target, "://") {
		return ""
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return target // unparsable: compared as is, and so refused
	}
	return u.Host
}

// isTokenByte reports whether c is a tchar (RFC 9110 §5.6.2).
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
