package auditlog

import "errors"

// ErrInput marks an input that cannot be read (missing file, broken gzip
// stream). Lines that are not records are counted, not errors.
var ErrInput = errors.New("auditlog: unreadable input")
