package proxy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// blindInspectRule is inspectRules's inspect.test rule without inspection.
const blindInspectRule = `  - hosts: ["inspect.test"]
    ports: [{tls}]
    cidrs: ["127.0.0.0/8"]
`

// narrowedInspectRules is inspectRules with inspect.test's paths cut to
// /small.
var narrowedInspectRules = strings.Replace(inspectRules, `"/small", "/redirect", "/hold", "/stall", "/drip"`, `"/small"`, 1)

// TestRevokeOnChangedRequirements: a reload that still allows an open
// tunnel's host but asks of it what the tunnel cannot give (inspection it
// lacks, no inspection where it inspects, other http entries) closes it
// like a revoked one (outcome revoked, reason rule-changed, error saying
// why), so that the client reconnects under the new rule; a reload of the
// same rules keeps it; audit mode keeps it open with would_deny.
func TestRevokeOnChangedRequirements(t *testing.T) {
	tests := []struct {
		name      string
		from, to  string
		inspected bool // the tunnel is inspected before the reload
		mode      policy.Mode
		why       string // in the record's error; "" keeps the tunnel
	}{
		{"blind to inspected", blindInspectRule, inspectRules, false, "", "now inspects"},
		{"inspected to blind", inspectRules, blindInspectRule, true, "", "no longer inspects"},
		{"paths narrowed", inspectRules, narrowedInspectRules, true, "", "http entries changed"},
		{"same rules reloaded", inspectRules, inspectRules, true, "", ""},
		{"audit: blind to inspected", blindInspectRule, inspectRules, false, policy.ModeAudit, "now inspects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{extra: tt.from, mode: tt.mode})
			roots := ie.ca.CertPool() // the origin's own CA: a blind tunnel
			if tt.inspected {
				roots = ie.ica.CertPool()
			}
			tc := ie.tunnel(t, "inspect.test", roots)
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			br := bufio.NewReader(tc)
			get := func() error {
				io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: inspect.test\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = errors.New(resp.Status)
				}
				return err
			}
			if err := get(); err != nil {
				t.Fatalf("first request: %v", err)
			}
			if tt.inspected {
				if r := ie.sink.next(t); r.Kind != record.KindInspected {
					t.Fatalf("record %+v; want the inspected exchange", r)
				}
			}
			ie.setPolicy(t, tt.to)
			start := time.Now()
			ie.p.Revalidate()
			if tt.why == "" || tt.mode == policy.ModeAudit {
				// Kept: the next request on the same tunnel is served. A
				// pass that would close it has run once the one Revalidate
				// started returns (revalRunning), which the test waits on.
				for ie.p.revalRunning.Load() {
					time.Sleep(time.Millisecond)
				}
				if err := get(); err != nil {
					t.Fatalf("request after the reload: %v; want the tunnel kept", err)
				}
				tc.Close()
				r := ie.sink.next(t)
				if tt.inspected {
					r = ie.sink.next(t) // the exchange came first
				}
				if r.Kind != record.KindConnect || r.Outcome == record.OutcomeRevoked {
					t.Fatalf("record kind %q outcome %q; want the tunnel, not revoked", r.Kind, r.Outcome)
				}
				if tt.mode == policy.ModeAudit && (!r.WouldDeny || r.Reason != string(policy.ReasonRuleChanged)) {
					t.Fatalf("record would_deny %v reason %q; want would_deny, rule-changed", r.WouldDeny, r.Reason)
				}
				return
			}
			r := ie.sink.next(t)
			if took := time.Since(start); took > time.Second {
				t.Errorf("revoked after %v; want within a second", took)
			}
			if r.Kind != record.KindConnect || r.Outcome != record.OutcomeRevoked || r.Verdict != "deny" ||
				r.Reason != string(policy.ReasonRuleChanged) || !strings.Contains(r.Error, tt.why) {
				t.Fatalf("record kind %q verdict %q reason %q outcome %q error %q; want the tunnel revoked, rule-changed, %q",
					r.Kind, r.Verdict, r.Reason, r.Outcome, r.Error, tt.why)
			}
			if err := get(); err == nil {
				t.Fatal("the revoked tunnel carried another request")
			}
		})
	}
}
