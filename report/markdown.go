package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// renderMarkdown writes the report as GitHub-flavoured Markdown: the
// summary, then a table per workload.
func renderMarkdown(out io.Writer, rep *Report) error {
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	s := &rep.Summary
	p("# egressd report")
	p("")
	p("%s.", md(inputLine(rep)))
	p("")
	p("Period: %s .. %s. %s; %s, %s.", fmtTime(rep.Period.From), fmtTime(rep.Period.To),
		countsLine(s.Counts), plural(int64(s.Workloads), "workload"), plural(int64(len(rep.UnknownClients)), "unknown client"))
	p("")
	p("## Summary")
	reasons := func(title, column string, m map[string]int64) {
		p("")
		p("### %s", title)
		p("")
		if len(m) == 0 {
			p("None.")
			return
		}
		p("| %s | requests |", column)
		p("|---|---:|")
		for _, k := range sortedKeys(m) {
			p("| %s | %d |", md(k), m[k])
		}
	}
	reasons("Denials by reason", "reason", s.DenialsByReason)
	reasons("Would-deny by reason (audit mode)", "reason", s.WouldDenyByReason)
	reasons("Outcomes", "outcome", s.Outcomes)

	p("")
	p("### Negative controls (metadata, link-local)")
	p("")
	if len(s.NegativeControls) == 0 {
		p("None.")
	} else {
		p("| namespace | workload | destination | reason | requests | first seen | last seen |")
		p("|---|---|---|---|---:|---|---|")
		for _, n := range s.NegativeControls {
			dest := n.Host
			if n.Port != 0 {
				dest = hostPort(n.Host, n.Port)
			}
			p("| %s | %s | %s | %s | %d | %s | %s |", md(n.Namespace), md(n.Workload.String()), md(dest), md(n.Reason),
				n.Count, fmtTime(n.FirstSeen), fmtTime(n.LastSeen))
		}
	}

	p("")
	p("### Unknown clients")
	p("")
	if len(rep.UnknownClients) == 0 {
		p("None.")
	} else {
		p("| address | requests | tried | first seen | last seen |")
		p("|---|---:|---|---|---|")
		for _, u := range rep.UnknownClients {
			p("| %s | %d | %s | %s | %s |", md(u.IP), u.Requests, md(strings.Join(listMore(u.Hosts, u.HostsTruncated), ", ")),
				fmtTime(u.FirstSeen), fmtTime(u.LastSeen))
		}
	}

	if s.UnusedRules != nil {
		p("")
		p("### Unused rules (%d policies checked)", s.PoliciesChecked)
		p("")
		if len(s.UnusedRules) == 0 {
			p("None.")
		} else {
			p("| policy | rule | ports | unused | entries |")
			p("|---|---:|---|---|---|")
			for _, u := range s.UnusedRules {
				what := "hosts"
				if u.Whole {
					what = "whole rule"
				}
				entries := append(append([]string(nil), u.Hosts...), u.CIDRs...)
				p("| %s | %s | %s | %s | %s |", md(u.Policy), md(u.Label()), ports(u.Ports), what, md(strings.Join(entries, ", ")))
			}
		}
	}

	for _, wl := range rep.Workloads {
		p("")
		p("## %s %s", md(wl.Namespace), md(wl.Workload.String()))
		p("")
		p("Pods: %s. Service accounts: %s.", md(strings.Join(listMore(wl.Pods, wl.PodsTruncated), ", ")), md(strings.Join(wl.ServiceAccounts, ", ")))
		p("%s; sent %s, received %s; first seen %s, last seen %s.", countsLine(wl.Counts), fmtBytes(wl.BytesSent),
			fmtBytes(wl.BytesReceived), fmtTime(wl.FirstSeen), fmtTime(wl.LastSeen))
		p("")
		p("| destination | requests | allowed | denied | would-deny | reasons | rule | TLS | HTTP status | peers | sent | received | first seen | last seen |")
		p("|---|---:|---:|---:|---:|---|---|---|---|---|---:|---:|---|---|")
		rows := wl.Destinations
		if wl.Other != nil {
			rows = append(rows[:len(rows):len(rows)], wl.Other)
		}
		for _, d := range rows {
			label := d.Label()
			if d.Open > 0 {
				label += fmt.Sprintf(" (%d open)", d.Open)
			}
			p("| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |", md(label), d.Requests, d.Allowed,
				d.Denied, d.WouldDeny, md(kvs(d.Reasons, ", ")), md(strings.Join(d.Rules, ", ")), md(kvs(d.TLS, ", ")),
				md(kvs(d.HTTPStatus, ", ")),
				md(strings.Join(listMore(d.Peers, d.PeersTruncated), ", ")), fmtBytes(d.BytesSent), fmtBytes(d.BytesReceived),
				fmtTime(d.FirstSeen), fmtTime(d.LastSeen))
		}
	}
	return w.Flush()
}

// md escapes text for a Markdown table cell: the characters that start
// markup or end a cell.
func md(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '|', '\\', '*', '_', '`', '[', ']', '<', '>', '#':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
