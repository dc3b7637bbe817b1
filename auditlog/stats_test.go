package auditlog

import (
	"errors"
	"testing"
)

// TestStatsCheck: lines read and none a record is ErrNoRecords; records
// beside unreadable lines, or no line at all, are not.
func TestStatsCheck(t *testing.T) {
	cases := []struct {
		name string
		s    Stats
		err  bool
		unrd int64
	}{
		{"nothing but junk", Stats{Inputs: 1, Lines: 2, Skipped: 1, TooLong: 1}, true, 2},
		{"records and junk", Stats{Inputs: 1, Lines: 3, Records: 2, Skipped: 1}, false, 1},
		{"empty input", Stats{Inputs: 1}, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Check()
			if (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrNoRecords)) || tc.s.Unreadable() != tc.unrd {
				t.Errorf("Check %v, Unreadable %d", err, tc.s.Unreadable())
			}
		})
	}
}
