package webhook

import "errors"

// ErrConflict is returned by a SecretStore when the Secret was created or
// changed by another writer (HTTP 409): the caller reads it again and
// adopts it.
var ErrConflict = errors.New("webhook: conflict")

// ErrNoCertificate is wrapped by New when the certificate directory holds
// no usable tls.crt and tls.key.
var ErrNoCertificate = errors.New("webhook: no serving certificate")
