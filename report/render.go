package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Formats of Render.
var Formats = []string{"table", "json", "csv", "markdown", "dot", "html"}

// Render writes rep in format (one of Formats).
func Render(w io.Writer, rep *Report, format string) error {
	var err error
	switch format {
	case "table", "":
		err = renderTable(w, rep)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	case "csv":
		err = renderCSV(w, rep)
	case "markdown":
		err = renderMarkdown(w, rep)
	case "dot":
		err = renderDOT(w, rep)
	case "html":
		err = renderHTML(w, rep)
	default:
		return fmt.Errorf("%w: format %q: want one of %s", ErrOptions, format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return fmt.Errorf("report: write %s: %w", format, err)
	}
	return nil
}

// ValidFormat reports whether f is one of Formats.
func ValidFormat(f string) bool { return slices.Contains(Formats, f) }

// fmtTime formats a time for people: UTC, seconds; "-" when zero.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtBytes formats a byte count in binary units, three significant digits.
func fmtBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return itoa(n) + "B"
	}
	f := float64(n)
	i := -1
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f < 10 {
		return fmt.Sprintf("%.1f%c", math.Floor(f*10)/10, units[i])
	}
	return fmt.Sprintf("%.0f%c", math.Floor(f), units[i])
}

// kvs formats counts as "a=1 b=2", by count (largest first), then name.
func kvs(m map[string]int64, sep string) string {
	type kv struct {
		k string
		v int64
	}
	list := make([]kv, 0, len(m))
	for k, v := range m {
		list = append(list, kv{k, v})
	}
	slices.SortFunc(list, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = e.k + "=" + itoa(e.v)
	}
	return strings.Join(parts, sep)
}

// sortedKeys returns m's keys by count, largest first, then by name.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return keys
}

// onlyAllowed reports whether reasons holds nothing but "allowed".
func notAllowed(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if k != "allowed" {
			out[k] = v
		}
	}
	return out
}

// ruleLabel shortens "ns/policy#i" to "policy#i" inside namespace ns.
func ruleLabel(ns, id string) string {
	if rest, ok := strings.CutPrefix(id, ns+"/"); ok {
		return rest
	}
	return id
}

// plural returns "1 request" or "n requests".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return itoa(n) + " " + word + "s"
}

// inputLine describes what was read, for the header of every format.
func inputLine(rep *Report) string {
	in := rep.Input
	s := fmt.Sprintf("%s from %s", plural(in.Records, "record"), plural(int64(in.Inputs), "input"))
	var extra []string
	if in.Duplicates > 0 {
		extra = append(extra, plural(in.Duplicates, "duplicate")+" merged")
	}
	if in.Interim > 0 {
		extra = append(extra, plural(in.Interim, "interim record")+" folded")
	}
	if in.Open > 0 {
		extra = append(extra, itoa(in.Open)+" still open")
	}
	if in.Skipped+in.TooLong > 0 {
		extra = append(extra, plural(in.Skipped+in.TooLong, "line")+" skipped (not records)")
	}
	if in.Probes > 0 {
		extra = append(extra, plural(in.Probes, "probe record")+" left out")
	}
	if in.Filtered > 0 {
		extra = append(extra, itoa(in.Filtered)+" filtered out")
	}
	if len(extra) > 0 {
		s += ": " + strings.Join(extra, ", ")
	}
	return s
}

func countsLine(c Counts) string {
	return fmt.Sprintf("%s: %d allowed, %d denied, %d would-deny", plural(c.Requests, "request"), c.Allowed, c.Denied, c.WouldDeny)
}
