package report

import "errors"

// Errors of report and suggest inputs and options.
var (
	// ErrInput marks an input that cannot be read (missing file, broken
	// gzip stream). Lines that are not records are counted, not errors.
	ErrInput = errors.New("report: unreadable input")
	// ErrOptions marks an invalid option (format, verdict, workload, time).
	ErrOptions = errors.New("report: invalid option")
)
