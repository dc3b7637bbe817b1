package export

import "errors"

// Sentinels; match with errors.Is.
var (
	// ErrSpoolFull is a Write that does not fit in the spool's bound
	// (--audit-spool-max): the engine has not acknowledged enough.
	ErrSpoolFull = errors.New("export: spool full (--audit-spool-max): the engine has not acknowledged the records it holds")
	// ErrConfig is an unusable configuration (endpoint, header, spool).
	ErrConfig = errors.New("export: bad configuration")
	// ErrEngine is an answer of the engine that is not 2xx.
	ErrEngine = errors.New("export: engine refused the records")
	// ErrClosed is a Write after Close.
	ErrClosed = errors.New("export: exporter closed")
)
