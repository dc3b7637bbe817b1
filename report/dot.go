package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/egressd/egressd/auditlog"
)

// renderDOT writes the dependency graph for Graphviz (dot -Tsvg):
// workloads left, hosts right, an edge per verdict class labelled with
// ports and requests; green allowed, red denied, orange dashed would-deny;
// a recorded redirect is a teal dashed edge from host to host.
func renderDOT(out io.Writer, rep *Report) error {
	g := buildGraph(rep)
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("// egressd report: %s", inputLine(rep))
	p("digraph egress {")
	p("  rankdir=LR;")
	p("  graph [fontname=%q, ranksep=3];", "Helvetica")
	p("  node [shape=box, style=rounded, fontname=%q];", "Helvetica")
	p("  edge [fontname=%q, fontsize=10];", "Helvetica")
	p("  subgraph cluster_workloads {")
	p("    label=%s;", dotQuote("workloads"))
	for _, n := range g.Left {
		p("    %s [label=%s, tooltip=%s];", dotQuote(n.ID), dotQuote(n.Label+"\n"+n.Sub), dotQuote(n.Title))
	}
	p("  }")
	p("  subgraph cluster_hosts {")
	p("    label=%s;", dotQuote("hosts"))
	for _, n := range g.Right {
		p("    %s [label=%s, shape=ellipse, style=solid];", dotQuote(n.ID), dotQuote(n.Label))
	}
	p("  }")
	for _, e := range g.Edges {
		style := "solid"
		if e.Class == auditlog.ClassWouldDeny {
			style = "dashed"
		}
		p("  %s -> %s [color=%s, style=%s, penwidth=%s, label=%s];", dotQuote(e.From.ID), dotQuote(e.To.ID),
			dotQuote(edgeColors[e.Class]), style, e.Width, dotQuote(fmt.Sprintf("%s %s: %d", e.Class, e.Ports, e.Count)))
	}
	for _, r := range g.Redirects {
		p("  %s -> %s [color=%s, style=dashed, constraint=false, penwidth=%s, label=%s];", dotQuote(r.From.ID), dotQuote(r.To.ID),
			dotQuote(edgeColors[classRedirect]), r.Width, dotQuote(fmt.Sprintf("redirect (%s): %d", r.Workload, r.Count)))
	}
	if g.HiddenLeft+g.HiddenRight > 0 {
		p("  // left out: %d clients and %d hosts with the fewest requests", g.HiddenLeft, g.HiddenRight)
	}
	p("}")
	return w.Flush()
}

// dotQuote quotes s as a DOT string: backslash and double quote escaped,
// a newline as \n (a centred line break).
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
