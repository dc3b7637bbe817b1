package http1

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ConnectTarget returns the host and port of a CONNECT request-target. The
// target is an authority (RFC 9110 §9.3.6); absolute says it was given as
// an absolute URI instead ("http://169.254.169.254:443/"): its authority is
// returned so that a caller can decide and record the host it names, and
// then refuse the request as malformed whatever the decision.
func ConnectTarget(target string) (host string, port int, absolute bool, err error) {
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
			return AuthorityHost(target, true), 0, absolute, perr
		}
		target = u.Host
	}
	host, port, err = SplitAuthority(target, 0)
	if err == nil && port == 0 {
		err = errors.New("CONNECT target needs a port")
	}
	return host, port, absolute, err
}

// SplitAuthority splits an authority into host and port (def when absent),
// brackets removed.
func SplitAuthority(authority string, def int) (string, int, error) {
	if authority == "" {
		return "", 0, errors.New("missing host")
	}
	host, ps, err := net.SplitHostPort(authority)
	if err != nil {
		// No port: the whole authority is the host (brackets removed).
		return strings.TrimSuffix(strings.TrimPrefix(authority, "["), "]"), def, nil
	}
	if ps == "" {
		return host, def, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return host, 0, fmt.Errorf("invalid port %q", ps)
	}
	return host, port, nil
}

// AuthorityHost returns the host of an absolute URI's authority, or of an
// authority (bare, when bare): userinfo, port and brackets removed. It is
// for records of refused requests only, never for a decision.
func AuthorityHost(s string, bare bool) string {
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
	if h, _, err := SplitAuthority(s, 0); err == nil {
		return h
	}
	return s
}

// AppendStatusLine appends an HTTP/1.1 status line, CRLF included.
func AppendStatusLine(b []byte, code int) []byte { return appendStatusLine(b, code, "") }

// appendStatusLine appends a status line whose reason phrase carries
// egressd's reason when there is one (AppendReasonPhrase).
func appendStatusLine(b []byte, code int, reason string) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = AppendReasonPhrase(b, code, reason)
	return append(b, "\r\n"...)
}
