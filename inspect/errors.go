package inspect

import "errors"

// Sentinel errors, matched with errors.Is through any wrapping.
var (
	// ErrBadPEM: a PEM input holds no usable block.
	ErrBadPEM = errors.New("inspect: bad PEM")
	// ErrNoName: a leaf was asked for without a host name (or for an IP).
	ErrNoName = errors.New("inspect: a leaf needs a host name")
	// ErrSNIMismatch: the client's TLS SNI is not the tunnel's host.
	ErrSNIMismatch = errors.New("inspect: SNI differs from the tunnel host")
	// ErrECH: the client's ClientHello carries Encrypted Client Hello.
	ErrECH = errors.New("inspect: ClientHello with Encrypted Client Hello")
	// ErrUpstreamTLS: the origin's TLS handshake or certificate
	// verification failed (outcome upstream-tls-failed).
	ErrUpstreamTLS = errors.New("inspect: upstream TLS failed")
	// ErrClientRefusedLeaf: the client's handshake failed after egressd
	// presented its leaf (outcome client-tls-failed): the client refused
	// it, most often because it does not trust the inspection CA.
	ErrClientRefusedLeaf = errors.New("inspect: the client refused the inspection leaf (does it trust the inspection CA?)")
)
