package sniff

import "errors"

// First is what a tunnel's client sent first: a ClientHello, a plaintext
// HTTP request head, or (neither) another protocol.
type First struct {
	Hello *ClientHello
	Head  *HTTPHead
}

// ParseFirst reads the start of a tunnel: a ClientHello, else a plaintext
// HTTP request head of at most maxHead bytes. ErrNeedMore asks for more
// bytes, ErrNotTLS means another protocol (relayed unchecked).
func ParseFirst(b []byte, maxHead int) (First, error) {
	ch, err := ParseClientHello(b)
	if err == nil {
		return First{Hello: &ch}, nil
	}
	if !errors.Is(err, ErrNotTLS) {
		return First{}, err
	}
	h, err := ParseHTTPHead(b, maxHead)
	switch {
	case err == nil:
		return First{Head: &h}, nil
	case errors.Is(err, ErrNotHTTP):
		return First{}, ErrNotTLS
	}
	return First{}, err
}
