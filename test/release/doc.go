// Package release tests that a release is reproducible (issues 17 and 23):
// the binary scripts/gobuild.sh makes (what `make release` and `make image`
// ship) is the same bytes when built twice from the same source, the second
// time from a copy of the tree at another path; the packaged chart and the
// OCI image archive of `make release` are the same bytes run after run
// (SHA256SUMS); and the chart a release packages renders, by default, the
// image that release made.
package release
