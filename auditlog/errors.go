package auditlog

import "errors"

// ErrInput marks an input that cannot be read (missing file, broken gzip
// stream). Lines that are not records are counted, not errors.
var ErrInput = errors.New("auditlog: unreadable input")

// ErrNoRecords marks inputs whose lines were read and none was an audit
// record (not JSON, the operational log only, the wrong file): a report of
// them would look clean and say nothing.
var ErrNoRecords = errors.New("auditlog: no line of the input is an audit record")
