package webhook

import "errors"

// ErrNoCertificate is wrapped by New when the certificate directory holds
// no usable tls.crt and tls.key.
var ErrNoCertificate = errors.New("webhook: no serving certificate")

// ErrBadCertConfig is wrapped by NewCertManager for a configuration it
// cannot use.
var ErrBadCertConfig = errors.New("webhook: bad certificate manager config")
