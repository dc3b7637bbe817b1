// Package credentials holds the credentials egressd adds to inspected
// requests (docs/design.md "Credentials", issue 28): the values read from
// --credentials-dir, one file per credential named by the credential's
// name (the layout of a Kubernetes Secret mounted as a volume: each key a
// symlink through ..data, which the kubelet swaps atomically), a trailing
// newline ignored, reloaded by polling (Store.Poll) so that a ..data swap
// is never missed.
//
// A credential whose file is absent, empty, or holds what cannot be a
// header value (a control character, a line break inside it) is
// unavailable from then on: a deleted key is a revoked key. Lookup answers
// the header value for a (name, format) pair from an immutable snapshot
// behind an atomic pointer, formatted once per snapshot: it allocates
// nothing per request.
//
// A value never leaves this package but through Lookup: no error, Report,
// String or log line of it holds a value, only names and what was wrong.
// The package logs nothing (its caller logs the Report) and imports the
// standard library only.
package credentials
