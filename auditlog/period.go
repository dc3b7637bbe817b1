package auditlog

import "time"

// Period is a time range; zero times mean none.
type Period struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}
