package suggest

import "errors"

var (
	// ErrOptions marks an invalid Config (--fold, --cidr).
	ErrOptions = errors.New("suggest: invalid option")
	// ErrSelfCheck marks a suggestion that failed its own check (policy
	// validation or replay through Decide): a bug, never printed as output.
	ErrSelfCheck = errors.New("suggest: suggested policy failed its self-check")
)
