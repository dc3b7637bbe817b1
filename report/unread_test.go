package report

import (
	"slices"
	"testing"

	"github.com/egressd/egressd/auditlog"
)

func TestUnreadAreMembers(t *testing.T) {
	members := auditlog.Members()
	for _, u := range Unread {
		if !slices.Contains(members, u) {
			t.Errorf("Unread names %q, which record.Record does not have (members: %v)", u, members)
		}
	}
}
