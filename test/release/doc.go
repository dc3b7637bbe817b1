// Package release tests that a release is reproducible (issue 17): the
// binary scripts/gobuild.sh makes (what `make release` and `make image`
// ship) is the same bytes when built twice from the same source, the second
// time from a copy of the tree at another path.
package release
