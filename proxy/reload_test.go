package proxy

import "testing"

// setPolicy replaces the env's policy with its test policy plus extra rules,
// as a reload does; open connections keep their decision until Revalidate.
func (e *env) setPolicy(t testing.TB, extra string) {
	t.Helper()
	e.snap.Store(compile(t, e.policyYAML(extra)))
}
