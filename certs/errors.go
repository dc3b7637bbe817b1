package certs

import "errors"

// Sentinel errors, matched with errors.Is through any wrapping.
var (
	// ErrNoHosts is returned by Issue when no host name or address is
	// given (and by NewCAWith without a common name).
	ErrNoHosts = errors.New("certs: no hosts to issue for")
	// ErrBadCA: a certificate or key this package cannot use. Every
	// refusal of LoadCA is also one of the reasons below, each of which
	// matches ErrBadCA; EncodePair wraps it for a pair it cannot encode.
	ErrBadCA = errors.New("certs: unusable certificate or key")
	// ErrCAKeyMismatch: the CA key is not the key of the CA certificate.
	ErrCAKeyMismatch error = badCA("certs: the CA key does not match the CA certificate")
	// ErrNotCA: the certificate cannot sign certificates (no CA:TRUE basic
	// constraint, or no keyCertSign key usage).
	ErrNotCA error = badCA("certs: the certificate is not a CA")
	// ErrCAExpired: the CA is outside its validity period.
	ErrCAExpired error = badCA("certs: the CA is not valid now")
	// ErrCANotYetValid: the CA's validity starts later (a renewed CA
	// whose NotBefore is ahead of this clock). It matches ErrCAExpired
	// and ErrBadCA too.
	ErrCANotYetValid error = notYetValid("certs: the CA is not valid yet")
	// ErrBadPEM: a PEM input holds no usable block.
	ErrBadPEM error = badCA("certs: bad PEM")
)

// badCA is a reason of LoadCA's refusal: errors.Is matches it and
// ErrBadCA, so a caller may ask for the reason or for any refusal.
type badCA string

func (e badCA) Error() string        { return string(e) }
func (e badCA) Is(target error) bool { return target == ErrBadCA }

// notYetValid is ErrCANotYetValid's type: one case of ErrCAExpired.
type notYetValid string

func (e notYetValid) Error() string { return string(e) }
func (e notYetValid) Is(target error) bool {
	return target == ErrBadCA || target == ErrCAExpired
}
