package probe

import "errors"

// Sentinel errors, matched with errors.Is through any wrapping.
var (
	// ErrParse marks a probe file that is not YAML, not the documented
	// shape, or that has unknown or duplicate fields.
	ErrParse = errors.New("probe: cannot parse")
	// ErrInvalid marks a check whose content is wrong (a missing name, a
	// port out of range, an unknown expectation).
	ErrInvalid = errors.New("probe: invalid check")
	// ErrConfig marks a Config that Validate refuses.
	ErrConfig = errors.New("probe: bad configuration")
)
