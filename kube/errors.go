package kube

import "errors"

// Sentinel errors, matched with errors.Is.
var (
	// ErrConfig marks a Config that New refuses.
	ErrConfig = errors.New("kube: invalid config")
	// ErrNotSynced marks Run ending before the caches synced.
	ErrNotSynced = errors.New("kube: caches did not sync")
)
