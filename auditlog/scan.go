package auditlog

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The JSON primitives of Decoder: objects, strings (interned or raw,
// unescaped as encoding/json does), numbers, booleans, RFC 3339 times,
// and skipping a value.

// object reads the object at b[i] (or null) into v, a struct of p's type,
// and returns the index after it.
func (d *Decoder) object(b []byte, i int, p *plan, v reflect.Value) (int, error) {
	i = skipWS(b, i)
	if isNull(b, i) {
		return i + 4, nil
	}
	if i >= len(b) || b[i] != '{' {
		return 0, fmt.Errorf("%w: want an object", errType)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	prev := -1
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, fmt.Errorf("%w: want a key", errSyntax)
		}
		key, next, err := d.rawString(b, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(b, next)
		if i >= len(b) || b[i] != ':' {
			return 0, fmt.Errorf("%w: want ':'", errSyntax)
		}
		i = skipWS(b, i+1)
		var m *member
		if m, prev = p.lookup(key, prev); m == nil || d.skipped(m) {
			i, err = skipValue(b, i)
		} else if i, err = d.value(b, i, m, v.Field(m.index)); err != nil {
			err = fmt.Errorf("%s: %w", m.path, err)
		}
		if err != nil {
			return 0, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, fmt.Errorf("%w: unterminated object", errSyntax)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, fmt.Errorf("%w: want ',' or '}'", errSyntax)
		}
	}
}

// str reads a string (or null, as "") and interns it.
func (d *Decoder) str(b []byte, i int) (string, int, error) {
	if isNull(b, i) {
		return "", i + 4, nil
	}
	s, next, err := d.rawString(b, i)
	if err != nil {
		return "", 0, err
	}
	return d.intern(s), next, nil
}

// ownStr reads a string (or null, as "") without interning it: its bytes
// are copied into a chunk that is only ever appended to, so that a string
// seen once (an id) costs no allocation of its own.
func (d *Decoder) ownStr(b []byte, i int) (string, int, error) {
	if isNull(b, i) {
		return "", i + 4, nil
	}
	s, next, err := d.rawString(b, i)
	if err != nil || len(s) == 0 {
		return "", next, err
	}
	if len(d.chunk)+len(s) > cap(d.chunk) {
		d.chunk = make([]byte, 0, max(chunkSize, len(s)))
	}
	n := len(d.chunk)
	d.chunk = append(d.chunk, s...)
	// The bytes are never written again: the chunk only grows, and a new
	// one replaces it when full.
	return unsafe.String(&d.chunk[n], len(s)), next, nil
}

// chunkSize is the size of the chunks ownStr copies strings into.
const chunkSize = 64 << 10

func (d *Decoder) intern(s []byte) string {
	if len(s) == 0 {
		return ""
	}
	// A cheap hash of the length and three bytes picks the cache slot.
	n := len(s)
	slot := (uint(n)*0x9e37 ^ uint(s[0])*0x1f3 ^ uint(s[n/2])*0x3b ^ uint(s[n-1])*0x7) & (internCache - 1)
	if c := d.cache[slot]; c == string(s) {
		return c
	}
	v, ok := d.strs[string(s)]
	if !ok {
		v = string(s)
		if len(d.strs) < maxInterned {
			d.strs[v] = v
		}
	}
	d.cache[slot] = v
	return v
}

// strings reads an array of strings (or null, as nil) into a list the
// Decoder keeps no hold of.
func (d *Decoder) strings(b []byte, i int) ([]string, int, error) {
	if isNull(b, i) {
		return nil, i + 4, nil
	}
	if i >= len(b) || b[i] != '[' {
		return nil, 0, fmt.Errorf("%w: want an array", errType)
	}
	d.list = d.list[:0]
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return d.keep(nil), i + 1, nil
	}
	for {
		s, next, err := d.str(b, i)
		if err != nil {
			return nil, 0, err
		}
		d.list = append(d.list, s)
		i = skipWS(b, next)
		if i >= len(b) {
			return nil, 0, fmt.Errorf("%w: unterminated array", errSyntax)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return d.keep(d.list), i + 1, nil
		default:
			return nil, 0, fmt.Errorf("%w: want ',' or ']'", errSyntax)
		}
	}
}

// rawString reads the string at b[i]. Without escapes it returns a slice
// of b; otherwise the unescaped bytes in d.scratch.
func (d *Decoder) rawString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, fmt.Errorf("%w: want a string", errType)
	}
	start := i + 1
	// Two vectorized scans beat a byte loop on host names and ids.
	end := bytes.IndexByte(b[start:], '"')
	if end < 0 {
		return nil, 0, fmt.Errorf("%w: unterminated string", errSyntax)
	}
	if esc := bytes.IndexByte(b[start:start+end], '\\'); esc >= 0 {
		return d.unescape(b, start, start+esc)
	}
	return b[start : start+end], start + end + 1, nil
}

// unescape builds the string that starts at b[start] and has its first
// escape at b[j], as encoding/json would: invalid UTF-8 and lone
// surrogates become U+FFFD.
func (d *Decoder) unescape(b []byte, start, j int) ([]byte, int, error) {
	out := append(d.scratch[:0], b[start:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			d.scratch = out
			return out, j + 1, nil
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			break
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
			j += 2
		case 'b':
			out, j = append(out, '\b'), j+2
		case 'f':
			out, j = append(out, '\f'), j+2
		case 'n':
			out, j = append(out, '\n'), j+2
		case 'r':
			out, j = append(out, '\r'), j+2
		case 't':
			out, j = append(out, '\t'), j+2
		case 'u':
			r, ok := hex4(b, j+2)
			if !ok {
				return nil, 0, fmt.Errorf("%w: bad \\u escape", errSyntax)
			}
			j += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
					r2, ok = hex4(b, j+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r, j = dec, j+6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, 0, fmt.Errorf("%w: bad escape", errSyntax)
		}
	}
	d.scratch = out
	return nil, 0, fmt.Errorf("%w: unterminated string", errSyntax)
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// int reads an integer (or null, as 0). A number with a fraction or an
// exponent is read as a float and truncated, as no field of a record
// needs one.
func (d *Decoder) int(b []byte, i int) (int64, int, error) {
	if isNull(b, i) {
		return 0, i + 4, nil
	}
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	var n int64
	digits := 0
	for ; j < len(b) && '0' <= b[j] && b[j] <= '9'; j++ {
		if digits >= 18 { // may overflow: the slow path checks
			return d.intSlow(b, i)
		}
		n = n*10 + int64(b[j]-'0')
		digits++
	}
	if digits == 0 {
		return 0, 0, fmt.Errorf("%w: want a number", errType)
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return d.intSlow(b, i)
	}
	if b[i] == '-' {
		n = -n
	}
	return n, j, nil
}

func (d *Decoder) intSlow(b []byte, i int) (int64, int, error) {
	f, next, err := d.float(b, i)
	if err != nil {
		return 0, 0, err
	}
	return int64(f), next, nil
}

func (d *Decoder) float(b []byte, i int) (float64, int, error) {
	if isNull(b, i) {
		return 0, i + 4, nil
	}
	j := i
	for j < len(b) && (('0' <= b[j] && b[j] <= '9') || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		j++
	}
	if j == i {
		return 0, 0, fmt.Errorf("%w: want a number", errType)
	}
	f, err := strconv.ParseFloat(string(b[i:j]), 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %q", errSyntax, b[i:j])
	}
	return f, j, nil
}

func (d *Decoder) bool(b []byte, i int) (bool, int, error) {
	switch {
	case hasAt(b, i, "true"):
		return true, i + 4, nil
	case hasAt(b, i, "false"):
		return false, i + 5, nil
	case isNull(b, i):
		return false, i + 4, nil
	}
	return false, 0, fmt.Errorf("%w: want a boolean", errType)
}

// time reads an RFC 3339 time as audit writes it (time.Time's
// MarshalText); the common UTC and offset forms are parsed by hand, the
// rest by time.Parse.
func (d *Decoder) time(b []byte, i int) (time.Time, int, error) {
	if isNull(b, i) {
		return time.Time{}, i + 4, nil
	}
	s, next, err := d.rawString(b, i)
	if err != nil {
		return time.Time{}, 0, err
	}
	t, ok := parseTime(s)
	if !ok {
		if t, err = time.Parse(time.RFC3339Nano, string(s)); err != nil {
			return time.Time{}, 0, fmt.Errorf("%w: time %q", errType, s)
		}
	}
	return t, next, nil
}

// parseTime parses "2006-01-02T15:04:05[.fraction](Z|±hh:mm)".
func parseTime(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(a, b int) (int, bool) {
		n := 0
		for _, c := range s[a:b] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 7)
	day, ok3 := num(8, 10)
	hour, ok4 := num(11, 13)
	minute, ok5 := num(14, 16)
	sec, ok6 := num(17, 19)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	i, nsec := 19, 0
	if s[i] == '.' {
		i++
		digits := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if digits < 9 {
				nsec = nsec*10 + int(s[i]-'0')
				digits++
			}
		}
		if digits == 0 {
			return time.Time{}, false
		}
		for ; digits < 9; digits++ {
			nsec *= 10
		}
	}
	loc := time.UTC
	switch rest := s[i:]; {
	case len(rest) == 1 && rest[0] == 'Z':
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		h, ok := num(i+1, i+3)
		m, ok2 := num(i+4, i+6)
		if !ok || !ok2 || h > 23 || m > 59 {
			return time.Time{}, false
		}
		off := (h*60 + m) * 60
		if rest[0] == '-' {
			off = -off
		}
		// The same instant as time.Parse gives; the zone's name does not
		// matter to a report.
		loc = time.FixedZone("", off)
	default:
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	if t.Day() != day { // Feb 30 and the like
		return time.Time{}, false
	}
	return t, true
}

// skipValue skips the JSON value at b[i] and returns the index after it.
func skipValue(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) {
		return 0, fmt.Errorf("%w: want a value", errSyntax)
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				break
			}
			j += k
			// The quote ends the string unless an odd number of
			// backslashes precedes it.
			bs := 0
			for q := j - 1; q > i && b[q] == '\\'; q-- {
				bs++
			}
			if bs%2 == 0 {
				return j + 1, nil
			}
			j++
		}
		return 0, fmt.Errorf("%w: unterminated string", errSyntax)
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k, err := skipValue(b, j)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated value", errSyntax)
	case hasAt(b, i, "true") || isNull(b, i):
		return i + 4, nil
	case hasAt(b, i, "false"):
		return i + 5, nil
	case c == '-' || ('0' <= c && c <= '9'):
		j := i + 1
		for j < len(b) && (('0' <= b[j] && b[j] <= '9') || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		return j, nil
	}
	return 0, fmt.Errorf("%w: unexpected %q", errSyntax, b[i])
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

func isNull(b []byte, i int) bool { return hasAt(b, i, "null") }
