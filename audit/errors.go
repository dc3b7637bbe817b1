package audit

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrTimeout: Flush, Close or Reopen waited Config.WaitTimeout for a sink
	// that did not finish (a hung write, a disk still full). The records stay
	// buffered and are still written if the sink recovers.
	ErrTimeout = errors.New("audit: timed out waiting for a sink")
	// ErrFailure: an --audit-failure value that is neither closed nor open.
	ErrFailure = errors.New("audit: failure mode must be closed or open")
)
