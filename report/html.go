package report

import (
	_ "embed"
	"html/template"
	"io"
	"strings"
)

//go:embed report.html.tmpl
var htmlSource string

// htmlTemplate is parsed once; html/template escapes every value for its
// context (text, attribute, the SVG inside the page).
var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"time":      fmtTime,
	"bytes":     fmtBytes,
	"kvs":       func(m map[string]int64) string { return kvs(m, ", ") },
	"join":      func(s []string) string { return strings.Join(s, ", ") },
	"more":      listMore,
	"keys":      sortedKeys,
	"counts":    countsLine,
	"input":     inputLine,
	"short":     func(s string) string { return truncLeft(s, 38) },
	"rule":      ruleLabel,
	"hostport":  hostPort,
	"ports":     ports,
	"textX":     func(n *gnode) int { return n.X + 10 },
	"textY":     func(n *gnode, line int) int { return n.Y + 13 + 13*line },
	"color":     func(class string) string { return edgeColors[class] },
	"rows":      destinationRows,
	"nodeW":     func() int { return nodeW },
	"nodeH":     func() int { return nodeH },
	"appendAll": func(a, b []string) []string { return append(append([]string(nil), a...), b...) },
}).Parse(htmlSource))

// renderHTML writes one self-contained page: inline CSS, the graph as
// inline SVG, no script, no external resource. Its Content-Security-Policy
// (default-src 'none') makes a browser refuse any fetch even if a value
// tried one; TestHTMLInChromium holds that no request is made.
func renderHTML(w io.Writer, rep *Report) error {
	return htmlTemplate.Execute(w, struct {
		*Report
		Graph  *graph
		Colors map[string]string
	}{rep, buildGraph(rep), edgeColors})
}

func destinationRows(wl *WorkloadReport) []*Destination {
	if wl.Other == nil {
		return wl.Destinations
	}
	return append(wl.Destinations[:len(wl.Destinations):len(wl.Destinations)], wl.Other)
}
