package evidence

import "errors"

// Sentinels, matched with errors.Is.
var (
	// ErrKey: a key file that is not a signed-note key of the kind asked for.
	ErrKey = errors.New("evidence: bad key")
	// ErrCheckpoint: a checkpoint that cannot be parsed or whose signature
	// does not verify.
	ErrCheckpoint = errors.New("evidence: bad checkpoint")
	// ErrProof: an inclusion proof that cannot be parsed or does not verify.
	ErrProof = errors.New("evidence: bad proof")
)
