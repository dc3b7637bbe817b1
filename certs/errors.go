package certs

import "errors"

// ErrNoHosts is returned by Issue when no host name or address is given
// (and by NewCAWith without a common name).
var ErrNoHosts = errors.New("certs: no hosts to issue for")

// ErrBadCA is wrapped by LoadCA and EncodePair for PEM or keys they cannot use.
var ErrBadCA = errors.New("certs: unusable certificate or key")
