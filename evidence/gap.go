package evidence

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Gap records (kind gap, written by the audit Logger when a sink dropped
// records under --audit-failure open; docs/design.md, "Records in a log
// engine") are signed records like any other. The verifier keeps the seq
// ranges they name, and a missing or truncated range they cover is still a
// finding, named with the gap: an input that lacks records stays
// incomplete, but not silently.

// gapNote is one gap record's range and its words for a finding.
type gapNote struct {
	first, last uint64
	text        string
}

// isGap reports whether line is a gap record: its kind comes right after
// its time.
func isGap(line []byte) bool {
	return bytes.Contains(line[:min(len(line), 80)], []byte(`","kind":"gap",`))
}

// gap keeps the range of the gap record line of ls.
func (v *Verifier) gap(ls *logState, line []byte) {
	var g struct {
		Sink     string
		Records  int64
		Cause    string
		FirstSeq *uint64 `json:"first_seq"`
		LastSeq  *uint64 `json:"last_seq"`
	}
	if json.Unmarshal(line, &g) != nil || g.FirstSeq == nil || g.LastSeq == nil || *g.LastSeq < *g.FirstSeq {
		return
	}
	ls.gaps = append(ls.gaps, gapNote{first: *g.FirstSeq, last: *g.LastSeq,
		text: g.Sink + " dropped " + strconv.FormatInt(g.Records, 10) + " records, seq " +
			strconv.FormatUint(*g.FirstSeq, 10) + "-" + strconv.FormatUint(*g.LastSeq, 10) + ": " + g.Cause})
}

// gapsOver names the gap records of ls whose range meets [lo, hi], as a
// finding's suffix; empty when none.
func (ls *logState) gapsOver(lo, hi uint64) string {
	var names []string
	for _, g := range ls.gaps {
		if g.first <= hi && g.last >= lo {
			names = append(names, g.text)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (gap recorded: " + strings.Join(names, "; ") + ")"
}
