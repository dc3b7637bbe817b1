package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Name limits of RFC 1035 §2.3.4: 63 octets a label, 255 on the wire, which
// is 253 in presentation form without the trailing dot.
const (
	maxLabelLen = 63
	maxNameLen  = 253
)

// idnaProfile converts Unicode names to A-labels. Choices, and why:
//   - UTS #46 mapping for lookup (case folding, full-width forms, U+3002 as
//     a dot): a user types names the way a browser accepts them.
//   - Non-transitional (IDNA2008): "straße.de" is xn--strae-oqa.de, not
//     strasse.de, as browsers and libidn2 (curl) resolve it today.
//   - STD3 rules off, hyphen checks off: the ASCII check below is ours, so
//     that "_srv._tcp" labels (RFC 2782; DNS allows them, RFC 2181 §11) and
//     real names like "r3---sn-abc.googlevideo.com" are accepted, while
//     invalid A-labels ("xn--zz") and bidi/joiner violations still fail.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.CheckHyphens(false),
	idna.CheckJoiners(true),
	idna.StrictDomainName(false), // after MapForLookup, which sets it
)

// NormalizeHost lower-cases, removes one trailing dot, converts IDNA to
// punycode and checks labels and length. An IP literal (also bracketed
// IPv6) is returned in netip canonical form.
//
// A host whose last label is a number (decimal, or hexadecimal with 0x) is
// an IPv4 address, never a name: browsers' URL parsers (the WHATWG URL
// standard's IPv4 parser) and inet_aton (getaddrinfo, so curl) read
// "0xa9fea9fe", "0xa9.0xfe.0xa9.0xfe", "169.254.43518",
// "0251.0376.0251.0376" and "2852039166" as 169.254.169.254. Such a host
// is returned in dotted-quad form, so that Decide and the guard classify
// the address the client would reach; one that is no address ("1.2.3.4.5",
// "example.123", "08") is refused (issue 10).
//
// Accepted label octets after conversion are a-z, 0-9, '-' and '_'; a label
// is 1–63 octets and neither starts nor ends with '-'; the name is at most
// 253 octets.
func NormalizeHost(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("policy: host %q: empty: %w", raw, ErrInvalidHost)
	}
	if a, ok := parseIPLiteral(raw); ok {
		return a.String(), nil
	}
	if !utf8.ValidString(raw) {
		// IDNA would map the bad bytes to U+FFFD and yield a valid name.
		return "", fmt.Errorf("policy: host %s: not UTF-8: %w", quote(raw), ErrInvalidHost)
	}
	name := strings.TrimSuffix(raw, ".")
	if isASCII(name) {
		name = strings.ToLower(name)
	}
	// Unicode, and A-labels whose punycode must be checked, go through IDNA;
	// plain ASCII names need only the checks below.
	if !isASCII(name) || strings.Contains(name, "xn--") {
		var err error
		name, err = idnaProfile.ToASCII(name)
		if err != nil {
			return "", fmt.Errorf("policy: host %s: %w: %w", quote(raw), ErrInvalidHost, err)
		}
	}
	if endsInNumber(name) {
		a, ok := parseIPv4Spelling(name)
		if !ok {
			return "", fmt.Errorf("policy: host %s: ends in a number but is no IPv4 address: %w", quote(raw), ErrInvalidHost)
		}
		return a.String(), nil
	}
	if err := checkName(name, false); err != nil {
		return "", fmt.Errorf("policy: host %s: %w", quote(raw), err)
	}
	return name, nil
}

// endsInNumber reports whether the last label of name is a number to an
// IPv4 parser: only decimal digits, or "0x"/"0X" and only hex digits
// (the WHATWG URL standard's "ends in a number checker"). Such a host is
// an IPv4 address or invalid, never a name. It does not allocate.
func endsInNumber(name string) bool {
	label := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		label = name[i+1:]
	}
	return isNumericLabel(label)
}

// isNumericLabel: decimal digits, or "0x"/"0X" and hex digits (none is
// zero to the WHATWG parser).
func isNumericLabel(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if digitValue(l[i]) >= 16 {
				return false
			}
		}
		return true
	}
	return allDigits(l)
}

// parseIPv4Spelling parses the IPv4 forms that inet_aton and the WHATWG
// URL parser accept: one to four dot-separated parts, each decimal, octal
// with a leading 0, or hexadecimal with 0x ("0x" alone is 0); every part
// but the last is one octet, the last fills the remaining octets
// ("127.1" is 127.0.0.1). A trailing dot must already be removed.
func parseIPv4Spelling(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for rest, more := s, true; more; n++ {
		var p string
		p, rest, more = strings.Cut(rest, ".")
		if n == len(parts) {
			return netip.Addr{}, false
		}
		v, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
	}
	for i := range n - 1 {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i := range n - 1 {
		b[i] = byte(parts[i])
	}
	for i := 3; i >= n-1; i-- {
		b[i] = byte(last)
		last >>= 8
	}
	return netip.AddrFrom4(b), true
}

// ipv4Number parses one part of an IPv4 spelling. Values above 2^32 fail
// early, so that a long part cannot overflow into a small address.
func ipv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		p, base = p[2:], 16
	case len(p) >= 2 && p[0] == '0':
		p, base = p[1:], 8
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d := digitValue(p[i])
		if d >= base {
			return 0, false
		}
		if v = v*base + d; v > 1<<32 {
			return 0, false
		}
	}
	return v, true
}

// digitValue returns the value of a hex digit, or 16 for any other byte.
func digitValue(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 16
}

// parseIPLiteral accepts the IP spellings a client may send as a host:
// dotted-quad IPv4, IPv6, and bracketed IPv6 ("[::1]", RFC 3986 §3.2.2).
func parseIPLiteral(s string) (netip.Addr, bool) {
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		return a, err == nil && a.Is6()
	}
	if !looksLikeIP(s) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil
}

// looksLikeIP reports whether s could be an IP literal: it holds a colon,
// or only digits and dots. It lets Decide skip netip.ParseAddr (whose
// error allocates) for ordinary names.
func looksLikeIP(s string) bool {
	if s == "" {
		return false
	}
	// A colon anywhere: IPv6 literals may start with a hex letter
	// ("fe80::1", "fd00:ec2::254"); stopping at the first letter sent those
	// to the name check, which refused them as invalid-host instead of
	// classifying them (and made NormalizeHost("[fe80::1]") not idempotent).
	digits := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' {
			return true
		}
		if c != '.' && (c < '0' || c > '9') {
			digits = false
		}
	}
	return digits
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checkName validates an ASCII, lower-case name without trailing dot. With
// wildcards, labels "*" and "**" pass (pattern.go decides where they may
// stand). The error wraps ErrInvalidHost.
func checkName(name string, wildcards bool) error {
	if name == "" {
		return fmt.Errorf("empty name: %w", ErrInvalidHost)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%d octets, more than %d: %w", len(name), maxNameLen, ErrInvalidHost)
	}
	last := ""
	for rest := name; ; {
		label, tail, more := strings.Cut(rest, ".")
		if err := checkLabel(label, wildcards); err != nil {
			return err
		}
		if !more {
			last = label
			break
		}
		rest = tail
	}
	if isNumericLabel(last) {
		// An IPv4 spelling to inet_aton and browsers, never a name.
		return fmt.Errorf("last label %q is numeric: %w", last, ErrInvalidHost)
	}
	return nil
}

func checkLabel(label string, wildcards bool) error {
	switch {
	case label == "":
		return fmt.Errorf("empty label: %w", ErrInvalidHost)
	case wildcards && (label == "*" || label == "**"):
		return nil
	case len(label) > maxLabelLen:
		return fmt.Errorf("label %q is %d octets, more than %d: %w", label, len(label), maxLabelLen, ErrInvalidHost)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-': %w", label, ErrInvalidHost)
	}
	for i := 0; i < len(label); i++ {
		if !isLabelByte(label[i]) {
			return fmt.Errorf("label %q holds %q: %w", label, label[i:i+1], ErrInvalidHost)
		}
	}
	return nil
}

func isLabelByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isNormalName is the allocation-free check Decide makes on a name it is
// given: the output alphabet of NormalizeHost, no empty label, no trailing
// dot, no numeric last label (an IPv4 spelling NormalizeHost would have
// turned into an address). A caller that forgot to normalize gets
// invalid-host, not a miss that could later turn into a match.
func isNormalName(s string) bool {
	if s == "" || len(s) > maxNameLen || s[0] == '.' || s[len(s)-1] == '.' || endsInNumber(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if s[i-1] == '.' {
				return false
			}
			continue
		}
		if !isLabelByte(c) {
			return false
		}
	}
	return true
}

// quote quotes a value for an error message, cut to a readable length.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
