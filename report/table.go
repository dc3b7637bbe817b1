package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// tableWidth is the widest line the table format writes.
const tableWidth = 100

// renderTable writes the report for a terminal: a summary, then one block
// per workload with a row per destination and an indented detail line.
// No line is wider than tableWidth columns; long names are shortened from
// the left (the end of a host name says the most).
func renderTable(out io.Writer, rep *Report) error {
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	wrap(w, "egressd report: ", strings.SplitAfter(inputLine(rep), ", "), "")
	p("period: %s .. %s", fmtTime(rep.Period.From), fmtTime(rep.Period.To))
	wrap(w, "", []string{countsLine(rep.Summary.Counts), plural(int64(rep.Summary.Workloads), "workload"),
		plural(int64(len(rep.UnknownClients)), "unknown client")}, "; ")

	s := &rep.Summary
	section := func(title string, m map[string]int64) {
		if len(m) == 0 {
			return
		}
		p("")
		p("%s", title)
		for _, k := range sortedKeys(m) {
			p("  %-40s %8s", trunc(k, 40), trunc(itoa(m[k]), 20))
		}
	}
	section("DENIALS BY REASON", s.DenialsByReason)
	section("WOULD-DENY BY REASON (audit mode)", s.WouldDenyByReason)
	section("OUTCOMES", s.Outcomes)

	p("")
	if len(s.NegativeControls) == 0 {
		p("NEGATIVE CONTROLS (metadata, link-local): none")
	} else {
		p("NEGATIVE CONTROLS (metadata, link-local)")
		for _, n := range s.NegativeControls {
			dest := n.Host
			if n.Port != 0 {
				dest = hostPort(n.Host, n.Port)
			}
			p("  %-30s %-24s %-10s %6s %s", trunc(n.Namespace+" "+n.Workload.String(), 30),
				truncLeft(dest, 24), trunc(n.Reason, 10), trunc(itoa(n.Count), 6), fmtTime(n.LastSeen))
		}
	}

	if len(rep.UnknownClients) > 0 {
		p("")
		p("UNKNOWN CLIENTS (no pod held the source address)")
		for _, u := range rep.UnknownClients {
			p("  %-39s %8s  %s .. %s", trunc(u.IP, 39), trunc(itoa(u.Requests), 12), fmtTime(u.FirstSeen), fmtTime(u.LastSeen))
			wrap(w, "    tried: ", listMore(u.Hosts, u.HostsTruncated), ", ")
		}
	}

	if s.UnusedRules != nil {
		p("")
		if len(s.UnusedRules) == 0 {
			p("UNUSED RULES: none (%d policies checked)", s.PoliciesChecked)
		} else {
			p("UNUSED RULES (%d policies checked; matched no request in the period)", s.PoliciesChecked)
			for _, u := range s.UnusedRules {
				what := "hosts never matched: "
				if u.Whole {
					what = "whole rule: "
				}
				entries := append(append([]string(nil), u.Hosts...), u.CIDRs...)
				wrap(w, fmt.Sprintf("  %s ports %s; %s", u.ID(), ports(u.Ports), what), entries, ", ")
			}
		}
	}

	for _, wl := range rep.Workloads {
		p("")
		p("%s", trunc("== "+wl.Namespace+" "+wl.Workload.String(), tableWidth))
		wrap(w, "   pods: ", listMore(wl.Pods, wl.PodsTruncated), ", ")
		wrap(w, "   service accounts: ", wl.ServiceAccounts, ", ")
		wrap(w, "   ", []string{countsLine(wl.Counts), "sent " + fmtBytes(wl.BytesSent) + ", received " + fmtBytes(wl.BytesReceived)}, "; ")
		p("   first %s, last %s", fmtTime(wl.FirstSeen), fmtTime(wl.LastSeen))
		p("   %-32s %5s %6s %6s %5s %5s %6s %6s  %s", "HOST", "PORT", "REQS", "ALLOW", "DENY", "WDENY", "SENT", "RECV", "RULE")
		rows := wl.Destinations
		if wl.Other != nil {
			rows = append(rows[:len(rows):len(rows)], wl.Other)
		}
		for _, d := range rows {
			port := "-"
			switch {
			case d.DNS:
				port = "dns"
			case d.Port != 0:
				port = itoa(int64(d.Port))
			}
			rule := "-"
			if len(d.Rules) > 0 {
				rule = ruleLabel(wl.Namespace, d.Rules[0])
				if len(d.Rules) > 1 {
					rule += fmt.Sprintf(" +%d", len(d.Rules)-1)
				}
			}
			p("   %-32s %5s %6s %6s %5s %5s %6s %6s  %s", truncLeft(d.Host, 32), port, num(d.Requests, 6), num(d.Allowed, 6),
				num(d.Denied, 5), num(d.WouldDeny, 5), fmtBytes(d.BytesSent), fmtBytes(d.BytesReceived), trunc(rule, 17))
			wrap(w, "     ", detail(d), "; ")
		}
	}
	return w.Flush()
}

// detail is what a destination row has beyond its columns.
func detail(d *Destination) []string {
	var parts []string
	if r := notAllowed(d.Reasons); len(r) > 0 {
		parts = append(parts, "reasons "+kvs(r, " "))
	}
	if o := d.Outcomes; len(o) > 0 && !(len(o) == 1 && o["ok"] > 0) {
		parts = append(parts, "outcomes "+kvs(o, " "))
	}
	if len(d.TLS) > 0 {
		parts = append(parts, "tls "+kvs(d.TLS, " "))
	}
	if len(d.HTTPStatus) > 0 {
		parts = append(parts, "http "+kvs(d.HTTPStatus, " "))
	}
	if len(d.Credentials) > 0 {
		parts = append(parts, "credentials "+kvs(d.Credentials, " "))
	}
	if len(d.Peers) > 0 {
		parts = append(parts, "peers "+strings.Join(listMore(d.Peers, d.PeersTruncated), " "))
	}
	if len(d.Rules) > 1 {
		parts = append(parts, "rules "+strings.Join(d.Rules, " "))
	}
	if d.Open > 0 {
		parts = append(parts, itoa(d.Open)+" still open")
	}
	parts = append(parts, "seen "+fmtTime(d.FirstSeen)+" .. "+fmtTime(d.LastSeen))
	return parts
}

// wrap writes prefix and items joined by sep, continuing on lines indented
// two columns deeper than prefix so that no line exceeds tableWidth (each
// line keeps room for the separator it may end with). An item longer than
// a line is shortened.
func wrap(w io.Writer, prefix string, items []string, sep string) {
	if len(items) == 0 {
		return
	}
	tail := strings.TrimRight(sep, " ")
	room := tableWidth - len(tail)
	indent := strings.Repeat(" ", len(prefix)-len(strings.TrimLeft(prefix, " "))+2)
	line := prefix + trunc(items[0], room-cols(prefix))
	for _, it := range items[1:] {
		if cols(line)+len(sep)+cols(it) > room {
			fmt.Fprintln(w, strings.TrimRight(line+tail, " "))
			line = indent + trunc(it, room-len(indent))
			continue
		}
		line += sep + it
	}
	fmt.Fprintln(w, line)
}

// trunc shortens s to n columns, marking the cut with "~". Columns are
// runes: a record's values are ASCII as egressd writes them, but a report
// must not cut a rune of anything else in half.
func trunc(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n == 1 {
		return "~"
	}
	return string(r[:n-1]) + "~"
}

// truncLeft shortens s to n columns from the left ("~ample.com").
func truncLeft(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "~" + string(r[len(r)-n+1:])
}

// num formats a count for a column of width n: a count too wide for it
// (a million requests in a 6-column cell) in thousands or millions.
func num(v int64, n int) string {
	s := itoa(v)
	for _, u := range []struct {
		div    int64
		suffix string
	}{{1_000, "k"}, {1_000_000, "M"}, {1_000_000_000, "G"}, {1_000_000_000_000, "T"}} {
		if len(s) <= n {
			break
		}
		s = itoa(v/u.div) + u.suffix
	}
	return trunc(s, n)
}

// cols is the width of s in columns (runes).
func cols(s string) int { return utf8.RuneCountInString(s) }

func listMore(items []string, more bool) []string {
	if more {
		return append(items[:len(items):len(items)], "(more)")
	}
	return items
}

func ports(ps []int32) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = itoa(int64(p))
	}
	return strings.Join(parts, ",")
}
