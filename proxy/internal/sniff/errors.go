package sniff

import "errors"

// Errors of the parsers; match them with errors.Is.
var (
	// ErrNeedMore: the bytes are a valid but incomplete prefix.
	ErrNeedMore = errors.New("sniff: incomplete TLS hello")
	// ErrNotTLS: the bytes do not start like TLS.
	ErrNotTLS = errors.New("sniff: not TLS")
	// ErrMalformed: TLS, but a hello that does not parse.
	ErrMalformed = errors.New("sniff: malformed TLS hello")
	// ErrNotHTTP: a tunnel's first bytes are no plaintext HTTP request.
	ErrNotHTTP = errors.New("sniff: not an HTTP request")
	// ErrBadHead: they are one, but oversized or unparsable.
	ErrBadHead = errors.New("sniff: malformed HTTP request head")
)
