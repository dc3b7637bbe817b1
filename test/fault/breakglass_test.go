package fault

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBreakGlassPolicyMode measures break-glass by policy (docs/operations.md,
// "Break-glass and rollback"): the real binary in enforce mode, with the
// default --reload-interval (1s), refuses a port no rule names; an
// operator sets the policy's spec.mode to audit (an atomic rename, as a
// ConfigMap update or an editor's save does) and the test measures the
// time until a new request is decided under it (allowed, would_deny); then
// back to enforce, until the same request is refused again. What bounds
// it: one poll interval plus the load (read, parse, compile, swap) on a
// machine shared by other builds; the assertion allows 5 s over the poll.
func TestBreakGlassPolicyMode(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--mode", "enforce", "--reload-interval", "1s")
	const poll = time.Second
	// Only the TLS port is allowed: the plain HTTP port is port-not-allowed.
	policyWith := func(mode string) string {
		return strings.Replace(fmt.Sprintf(policyTmpl, w.tlsPort), "spec:\n", "spec:\n  mode: "+mode+"\n", 1)
	}
	flip := func(mode string) {
		t.Helper()
		tmp := in.policy + ".tmp"
		write(t, tmp, policyWith(mode))
		if err := os.Rename(tmp, in.policy); err != nil {
			t.Fatal(err)
		}
	}
	url := "http://ok.fault.test:" + w.httpPort + "/"
	until := func(want int) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			// A request open across the swap may be revoked (reset): not yet.
			if got, err := in.tryGet(url); err == nil && got == want {
				return time.Since(start)
			}
			if time.Since(start) > poll+5*time.Second {
				t.Fatalf("GET %s still not %d %v after the edit\n%s", url, want, time.Since(start), in.logText())
			}
			time.Sleep(50 * time.Millisecond) // the resolution of the figure
		}
	}
	flip("enforce")
	until(403)
	var toAudit, toEnforce []time.Duration
	for range 3 {
		flip("audit")
		toAudit = append(toAudit, until(200))
		flip("enforce")
		toEnforce = append(toEnforce, until(403))
	}
	// Every 200 was decided under audit: allowed with would_deny, the
	// reason enforce gives (records reach the file within 50 ms).
	time.Sleep(200 * time.Millisecond)
	audited := 0
	for _, r := range in.records(t) {
		if r.Kind == "http" && r.Verdict == "allow" && r.Reason != "allowed" { // "allowed": before the first edit
			if !r.WouldDeny || r.Reason != "port-not-allowed" {
				t.Fatalf("an allowed request without would_deny: %+v", r)
			}
			audited++
		}
	}
	if audited < 3 {
		t.Fatalf("%d audit-mode records, want at least 3 (one a round)", audited)
	}
	slices.Sort(toAudit)
	slices.Sort(toEnforce)
	t.Logf("--reload-interval %v: spec.mode audit decided after %v (min %v, max %v); back to enforce after %v (min %v, max %v); 3 rounds",
		poll, toAudit[1].Round(time.Millisecond), toAudit[0].Round(time.Millisecond), toAudit[2].Round(time.Millisecond),
		toEnforce[1].Round(time.Millisecond), toEnforce[0].Round(time.Millisecond), toEnforce[2].Round(time.Millisecond))
}
