package inspect

import (
	"bytes"
	"errors"
	"fmt"
)

// errBadHead marks an HTTP/1.1 request head refused before parsing.
var errBadHead = errors.New("inspect: malformed request head")

// screenHead checks a complete HTTP/1.x request head (up to and including
// the empty line) for the shapes where two parsers could disagree on
// framing or host, as the proxy's plain-HTTP reader refuses them (RFC
// 9112): a bare LF or CR, obs-fold (RFC 9112 §5.2), whitespace before a
// field's colon (§5.1), more than one Host, Transfer-Encoding other than
// exactly chunked, Transfer-Encoding beside Content-Length (§6.1, the
// CL.TE/TE.CL smuggling shapes) or on HTTP/1.0, and Content-Length fields
// that are not all the same digits. What passes is then parsed by
// net/http's reader, which agrees on everything this leaves.
func screenHead(head []byte) error {
	lines := 0
	var (
		hosts, tes    int
		cl            []byte
		clSeen, http0 bool
		chunked       = true
	)
	for rest := head; len(rest) > 0; lines++ {
		i := bytes.IndexByte(rest, '\n')
		if i < 1 || rest[i-1] != '\r' {
			return fmt.Errorf("%w: a line does not end in CRLF", errBadHead)
		}
		line := rest[:i-1]
		rest = rest[i+1:]
		if bytes.IndexByte(line, '\r') >= 0 {
			return fmt.Errorf("%w: bare CR", errBadHead)
		}
		if lines == 0 {
			http0 = bytes.HasSuffix(line, []byte(" HTTP/1.0"))
			continue
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return fmt.Errorf("%w: obs-fold", errBadHead)
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return fmt.Errorf("%w: a field without a name and colon", errBadHead)
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		if c := name[len(name)-1]; c == ' ' || c == '\t' {
			return fmt.Errorf("%w: whitespace before a field's colon", errBadHead)
		}
		switch {
		case asciiEqualFold(name, "host"):
			hosts++
		case asciiEqualFold(name, "transfer-encoding"):
			tes++
			chunked = chunked && asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "content-length"):
			if len(value) == 0 || bytes.IndexFunc(value, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
				return fmt.Errorf("%w: Content-Length %q", errBadHead, value)
			}
			if clSeen && !bytes.Equal(cl, value) {
				return fmt.Errorf("%w: Content-Length fields disagree", errBadHead)
			}
			cl, clSeen = value, true
		}
	}
	switch {
	case hosts > 1:
		return fmt.Errorf("%w: %d Host fields", errBadHead, hosts)
	case tes > 1 || tes == 1 && !chunked:
		return fmt.Errorf("%w: Transfer-Encoding other than one chunked", errBadHead)
	case tes == 1 && clSeen:
		return fmt.Errorf("%w: both Content-Length and Transfer-Encoding", errBadHead)
	case tes == 1 && http0:
		return fmt.Errorf("%w: Transfer-Encoding in HTTP/1.0", errBadHead)
	}
	return nil
}

// asciiEqualFold compares b with the lower-case s, folding ASCII letters
// only (net/http's rule: "chun\u212Aed", with a Kelvin sign, is not
// chunked).
func asciiEqualFold(b []byte, s string) bool {
	return len(b) == len(s) && string(bytes.Map(lowerASCII, b)) == s
}

func lowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
