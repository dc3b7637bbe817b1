package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Request paths and path patterns of inspected rules (docs/design.md
// "Inspection"). A request path is cleaned once (CleanPath) and then
// compared byte for byte with the rule's patterns: an exact path, a final
// "/*" (exactly one more segment) or a final "/**" (one or more). Patterns
// are cleaned by the same function, so a pattern and a request mean the
// same bytes.

// Errors of CleanPath, wrapped with the offending detail.
var (
	// ErrUncleanPath marks a request path that is refused bad-request: not
	// absolute, a "." or ".." segment, an empty segment ("//"), an encoded
	// "/" or "\", a NUL, a backslash, a control byte, a space or "#", or
	// an invalid percent escape.
	ErrUncleanPath = errors.New("unclean path")
	// ErrInvalidPathPattern marks a path pattern Validate refuses.
	ErrInvalidPathPattern = errors.New("invalid path pattern")
)

// CleanPath returns the path of a request target for matching: the part
// before the first "?" (the query is ignored), percent escapes decoded
// once. It refuses, wrapping ErrUncleanPath, what two parsers could read
// differently: a path that does not start with "/", an invalid escape, an
// encoded "/" (%2F) or "\" (%5C), a NUL (raw or %00), a raw "\", control
// bytes, spaces and "#", an empty segment ("//"; a final "/" is a trailing
// slash and kept), and "." or ".." segments, raw or encoded ("%2e%2e"),
// with or without ";" parameters ("..;x").
// Bytes of 0x80 and above (UTF-8, raw or encoded) are kept as they are.
// A path without escapes is returned without allocating.
func CleanPath(target string) (string, error) {
	p := target
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if p == "" || p[0] != '/' {
		return "", fmt.Errorf("%w: %s: not an absolute path", ErrUncleanPath, quote(p))
	}
	escaped := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '%':
			escaped = true
		case c <= ' ' || c == 0x7f:
			return "", fmt.Errorf("%w: %s: control byte or space at %d", ErrUncleanPath, quote(p), i)
		case c == '#' || c == '\\':
			return "", fmt.Errorf("%w: %s: %q at %d", ErrUncleanPath, quote(p), c, i)
		}
	}
	if escaped {
		var err error
		if p, err = unescapePath(p); err != nil {
			return "", err
		}
	}
	// Segments: every "/" starts one; the last may be empty (a trailing
	// slash), no other may be.
	for rest := p[1:]; ; {
		seg, tail, more := strings.Cut(rest, "/")
		switch {
		case seg == "" && more:
			return "", fmt.Errorf("%w: %s: empty segment (//)", ErrUncleanPath, quote(target))
		case seg == "." || seg == "..":
			return "", fmt.Errorf("%w: %s: %q segment", ErrUncleanPath, quote(target), seg)
		case isDotParam(seg):
			// "..;x" (raw or "%2e%2e%3b"): servlet containers (Tomcat,
			// Jetty) drop a segment's ";" parameters before resolving
			// dot segments, so "/v1/models/..;/files" reaches /v1/files.
			return "", fmt.Errorf("%w: %s: %q segment (a dot segment with a parameter)", ErrUncleanPath, quote(target), seg)
		}
		if !more {
			return p, nil
		}
		rest = tail
	}
}

// isDotParam reports whether seg is "." or ".." followed by ";"
// parameters.
func isDotParam(seg string) bool {
	dots, _, ok := strings.Cut(seg, ";")
	return ok && (dots == "." || dots == "..")
}

// unescapePath decodes every %XX of p once, refusing an invalid escape
// and the escapes CleanPath refuses.
func unescapePath(p string) (string, error) {
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
			return "", fmt.Errorf("%w: %s: invalid percent escape at %d", ErrUncleanPath, quote(p), i)
		}
		c := unhex(p[i+1])<<4 | unhex(p[i+2])
		switch {
		case c == '/' || c == '\\':
			return "", fmt.Errorf("%w: %s: encoded %q at %d", ErrUncleanPath, quote(p), c, i)
		case c < ' ' || c == 0x7f:
			return "", fmt.Errorf("%w: %s: encoded control byte or NUL at %d", ErrUncleanPath, quote(p), i)
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// pathKind says what follows a pattern's fixed part.
type pathKind uint8

const (
	pathExact pathKind = iota // the path is the pattern
	pathOne                   // "/*": exactly one more non-empty segment
	pathMany                  // "/**": one or more segments
)

// pathPattern is a parsed path pattern: a cleaned fixed part and a kind.
// For the wildcards, prefix ends with the "/" the wildcard follows.
type pathPattern struct {
	prefix string
	kind   pathKind
}

// parsePathPattern parses a rule's path pattern: a clean absolute path
// (CleanPath, no query) with, optionally, "*" or "**" as its whole last
// segment. A "*" anywhere else is refused (no other wildcards); "/a//*"
// is refused as CleanPath refuses "//".
func parsePathPattern(s string) (pathPattern, error) {
	if strings.IndexByte(s, '?') >= 0 {
		return pathPattern{}, fmt.Errorf("%w: a query (%q) is not matched: write the path alone", ErrInvalidPathPattern, "?")
	}
	pat := pathPattern{prefix: s}
	switch {
	case strings.HasSuffix(s, "/**"):
		pat = pathPattern{prefix: s[:len(s)-2], kind: pathMany}
	case strings.HasSuffix(s, "/*"):
		pat = pathPattern{prefix: s[:len(s)-1], kind: pathOne}
	}
	if strings.IndexByte(pat.prefix, '*') >= 0 {
		return pathPattern{}, fmt.Errorf("%w: %q only as the whole last segment (\"/*\" one more segment, \"/**\" one or more)", ErrInvalidPathPattern, "*")
	}
	clean, err := CleanPath(pat.prefix)
	if err != nil {
		return pathPattern{}, fmt.Errorf("%w: %w", ErrInvalidPathPattern, err)
	}
	pat.prefix = clean
	return pat, nil
}

// matches reports whether the cleaned request path p matches.
func (pat *pathPattern) matches(p string) bool {
	if pat.kind == pathExact {
		return p == pat.prefix
	}
	rest, ok := strings.CutPrefix(p, pat.prefix)
	if !ok || rest == "" {
		return false
	}
	// p is clean, so rest cannot start with "/".
	return pat.kind == pathMany || strings.IndexByte(rest, '/') < 0
}
