package certs

import "errors"

// ErrNoHosts is returned by Issue when no host name or address is given.
var ErrNoHosts = errors.New("certs: no hosts to issue for")
