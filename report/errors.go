package report

import "errors"

// Errors of report and suggest options (unreadable inputs are
// auditlog.ErrInput).
var (
	// ErrOptions marks an invalid option (format, verdict, workload, time).
	ErrOptions = errors.New("report: invalid option")
)
