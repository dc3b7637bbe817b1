package inject

import "errors"

// ErrBadNoProxy is wrapped by Config.Validate for a user NO_PROXY entry
// that could cover a name outside the cluster (docs/design.md: "never an
// entry that covers an external name").
var ErrBadNoProxy = errors.New("inject: NO_PROXY entry refused")

// ErrBadConfig is wrapped by Config.Validate for every other bad field.
var ErrBadConfig = errors.New("inject: bad config")
