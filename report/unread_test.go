package report

import (
	"testing"

	"github.com/egressd/egressd/auditlog"
)

// TestUnreadAreMembers: every name in Unread is a member of record.Record
// (the decoder refuses a name that is none).
func TestUnreadAreMembers(t *testing.T) {
	if _, err := auditlog.NewDecoder(Unread...); err != nil {
		t.Errorf("Unread: %v", err)
	}
}
