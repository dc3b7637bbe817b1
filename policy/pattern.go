package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"
)

// Pattern is a parsed host pattern of an egress rule (docs/design.md "Host
// patterns"):
//
//	a.example.com        exactly that name
//	*.example.com        one label, then example.com (not example.com itself)
//	ec2.*.amazonaws.com  "*" is one whole label at any position
//	**.example.com       one or more labels, then example.com; "**" only leftmost
//
// Wildcards never match the apex. The zero Pattern matches nothing.
type Pattern struct {
	text   string   // normalized pattern
	labels []string // left to right; "*" and "**" included
}

// probeLabel is an ordinary label used to ask the public suffix list
// whether a wildcard position could be a public suffix itself (rules such
// as "*.ck" make "x.ck" one, while "ck" alone is not listed).
const probeLabel = "egressd-probe"

// ParsePattern normalizes and checks a host pattern. Names are normalized
// as by NormalizeHost. Refused: empty, IP literals (a rule reaches
// addresses through cidrs), bare "*" or "**", partial-label wildcards
// ("a*.b.com"), "**" anywhere but leftmost, a wildcard as the last label,
// and any wildcard pattern whose fixed part right of its rightmost wildcard
// is an ICANN public suffix or lies inside one ("*.com", "**.co.uk",
// "*.*.com", "www.*.com", "*.kawasaki.jp"): such a pattern spans names of
// unrelated owners. The rightmost wildcard is the one that matters: any
// wildcard left of it only widens the pattern further.
func ParsePattern(raw string) (Pattern, error) {
	p, err := parsePattern(raw)
	if err != nil {
		return Pattern{}, fmt.Errorf("policy: pattern %s: %w", quote(raw), err)
	}
	return p, nil
}

func parsePattern(raw string) (Pattern, error) {
	if raw == "" {
		return Pattern{}, fmt.Errorf("empty: %w", ErrInvalidPattern)
	}
	if _, ok := parseIPLiteral(raw); ok {
		return Pattern{}, fmt.Errorf("an IP literal; name the address range in cidrs instead: %w", ErrInvalidPattern)
	}
	if !utf8.ValidString(raw) {
		return Pattern{}, fmt.Errorf("not UTF-8: %w", ErrInvalidPattern)
	}
	name := strings.TrimSuffix(raw, ".")
	if isASCII(name) {
		name = strings.ToLower(name)
	}
	if !isASCII(name) || strings.Contains(name, "xn--") {
		var err error
		if name, err = idnaProfile.ToASCII(name); err != nil {
			return Pattern{}, fmt.Errorf("%w: %w", ErrInvalidPattern, err)
		}
	}
	labels := strings.Split(name, ".")
	wild := -1 // index of the rightmost wildcard label
	for i, l := range labels {
		switch {
		case l == "**" && i > 0:
			return Pattern{}, fmt.Errorf(`"**" may only be the leftmost label: %w`, ErrInvalidPattern)
		case l == "*" || l == "**":
			wild = i
		case strings.Contains(l, "*"):
			return Pattern{}, fmt.Errorf("label %q: a wildcard must be a whole label: %w", l, ErrInvalidPattern)
		}
	}
	if err := checkName(name, true); err != nil {
		return Pattern{}, fmt.Errorf("%w: %w", ErrInvalidPattern, err)
	}
	if wild < 0 {
		return Pattern{text: name, labels: labels}, nil
	}
	if len(labels) == 1 {
		return Pattern{}, fmt.Errorf("a bare wildcard matches every name: %w", ErrInvalidPattern)
	}
	if wild == len(labels)-1 {
		return Pattern{}, fmt.Errorf("a wildcard as the last label spans every top-level domain: %w", ErrInvalidPattern)
	}
	tail := strings.Join(labels[wild+1:], ".")
	if ps, ok := suffixAt(tail, true); ok {
		return Pattern{}, fmt.Errorf("covers the ICANN public suffix %q: names under it belong to unrelated owners: %w", ps, ErrInvalidPattern)
	}
	return Pattern{text: name, labels: labels}, nil
}

// suffixAt reports whether tail, or a label directly left of it, is a public
// suffix of the requested kind (icann, or privately registered when
// !icann), and which one. The default rule of the list (an unlisted TLD
// such as "internal") is neither: such names are not on anyone's shared
// registry.
func suffixAt(tail string, icann bool) (string, bool) {
	for _, name := range [...]string{tail, probeLabel + "." + tail} {
		ps, isICANN := publicsuffix.PublicSuffix(name)
		if ps != name {
			continue
		}
		if icann && isICANN {
			return ps, true
		}
		if !icann && !isICANN && strings.Contains(ps, ".") {
			if name != tail {
				ps = "*." + tail
			}
			return ps, true
		}
	}
	return "", false
}

// String returns the normalized pattern.
func (p Pattern) String() string { return p.text }

// Exact reports whether the pattern has no wildcard.
func (p Pattern) Exact() bool {
	for _, l := range p.labels {
		if l == "*" || l == "**" {
			return false
		}
	}
	return len(p.labels) > 0
}

// Match reports whether the normalized host name matches the pattern. It
// does not allocate. (Decide does not call it: it walks an index.)
func (p Pattern) Match(host string) bool {
	if len(p.labels) == 0 || host == "" {
		return false
	}
	rest, more := host, true
	for i := len(p.labels) - 1; i >= 0; i-- {
		pl := p.labels[i]
		if pl == "**" {
			return more // one or more labels left
		}
		if !more {
			return false
		}
		var label string
		label, rest, more = lastLabel(rest)
		if pl != "*" && pl != label {
			return false
		}
	}
	return !more
}

// lastLabel splits the rightmost label off name without allocating; more
// reports whether labels remain in rest.
func lastLabel(name string) (label, rest string, more bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return name, "", false
	}
	return name[i+1:], name[:i], true
}

// Covers reports whether every name q matches is also matched by p, so
// that a rule naming q next to p adds nothing (used by Lint).
func (p Pattern) Covers(q Pattern) bool {
	a, b := p.labels, q.labels
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if a[0] == "**" {
		fixed := a[1:]
		if len(b) <= len(fixed) {
			return false
		}
		return coversFixed(fixed, b[len(b)-len(fixed):])
	}
	return len(a) == len(b) && coversFixed(a, b)
}

// coversFixed compares label sequences of equal length without "**" in a.
func coversFixed(a, b []string) bool {
	for i := range a {
		switch {
		case b[i] == "**":
			return false
		case a[i] == "*":
		case a[i] != b[i]:
			return false
		}
	}
	return true
}
