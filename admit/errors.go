package admit

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrAuditUnavailable is the error of an admission refused while
	// records cannot be written (Config.AuditAvailable).
	ErrAuditUnavailable = errors.New("admit: audit records cannot be written")
	// ErrPort is the error of a destination port outside 1-65535.
	ErrPort = errors.New("admit: port out of range")
	// ErrNoAddress is a lookup that succeeded with no address.
	ErrNoAddress = errors.New("admit: no addresses")
	// ErrRefused is the error of a route whose every address the guard
	// refused (for the caller's record; Route.Decision holds the denial).
	ErrRefused = errors.New("admit: every address refused by the guard")
	// ErrNoResolver is a Route of a name without Config.Resolver.
	ErrNoResolver = errors.New("admit: no resolver")
)
