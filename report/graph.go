package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/egressd/egressd/auditlog"
)

// graph is the dependency map that dot and html draw: workloads (and
// unknown clients) on the left, hosts on the right, an edge per workload,
// host and verdict class, and an arc per workload and recorded redirect
// from host to host (drawn right of the hosts' column).
type graph struct {
	Left, Right []*gnode
	Edges       []*gedge
	Redirects   []*gredirect
	// HiddenLeft and HiddenRight count the nodes left out beyond the
	// limits (the ones with the fewest requests).
	HiddenLeft, HiddenRight int
	// SVG geometry; RightX is where the hosts' column starts.
	Width, Height, RightX int
}

type gnode struct {
	ID       string // stable identifier (dot)
	Label    string
	Sub      string // second line: kind, namespace
	Title    string // tooltip
	Requests int64
	X, Y     int // top-left corner in the SVG
}

type gedge struct {
	From, To *gnode
	Class    string // ClassAllow, ClassDeny, ClassWouldDeny
	Count    int64
	Ports    string
	Path     string // SVG path
	Width    string // SVG stroke width
}

// gredirect is a recorded redirect of one workload: From answered a 3xx
// whose Location named To.
type gredirect struct {
	From, To *gnode
	Workload string // "namespace Kind/name"
	Count    int64
	Path     string // SVG path
	Width    string // SVG stroke width
}

// Graph limits: a readable page, whatever the logs hold.
const (
	maxLeftNodes  = 80
	maxRightNodes = 250
	nodeW, nodeH  = 300, 32
	rowH          = 40
	graphTop      = 48
	graphWidth    = 1000
	// redirectRoom is the room right of the hosts for redirect arcs.
	redirectRoom = 96
)

func buildGraph(rep *Report) *graph {
	g := &graph{}
	type edgeKey struct {
		left  *gnode
		host  string
		class string
	}
	hosts := map[string]*gnode{}
	edges := map[edgeKey]*gedge{}
	ports := map[[2]string][]string{}
	hostNode := func(h string, n int64) *gnode {
		hn := hosts[h]
		if hn == nil {
			hn = &gnode{ID: "h:" + h, Label: h, Title: h}
			hosts[h] = hn
		}
		hn.Requests += n
		return hn
	}
	addEdge := func(l *gnode, h, class, port string, n int64) {
		if n == 0 {
			return
		}
		hn := hostNode(h, n)
		k := edgeKey{l, h, class}
		e := edges[k]
		if e == nil {
			e = &gedge{From: l, To: hn, Class: class}
			edges[k] = e
		}
		e.Count += n
		pk := [2]string{l.ID, h}
		if !slices.Contains(ports[pk], port) {
			ports[pk] = append(ports[pk], port)
		}
	}
	for _, wl := range rep.Workloads {
		l := &gnode{
			ID: "w:" + wl.Namespace + "/" + wl.Workload.String(), Label: wl.Name,
			Sub: wl.Kind + " in " + wl.Namespace, Requests: wl.Requests,
			Title: wl.Namespace + " " + wl.Workload.String() + ": " + countsLine(wl.Counts),
		}
		g.Left = append(g.Left, l)
		for _, d := range wl.Destinations {
			port := "dns"
			if !d.DNS {
				port = itoa(int64(d.Port))
			}
			addEdge(l, d.Host, auditlog.ClassAllow, port, d.Allowed)
			addEdge(l, d.Host, auditlog.ClassDeny, port, d.Denied)
			addEdge(l, d.Host, auditlog.ClassWouldDeny, port, d.WouldDeny)
		}
		for _, rd := range wl.Redirects {
			// A redirect target the workload never asked for (it did not
			// follow) is still a host of the map.
			g.Redirects = append(g.Redirects, &gredirect{From: hostNode(rd.From, 0), To: hostNode(rd.To, 0),
				Workload: wl.Namespace + " " + wl.Workload.String(), Count: rd.Count})
		}
	}
	for _, u := range rep.UnknownClients {
		l := &gnode{ID: "u:" + u.IP, Label: u.IP, Sub: "unknown client", Requests: u.Requests,
			Title: u.IP + ": no pod held this address; " + plural(u.Requests, "request") + " denied"}
		g.Left = append(g.Left, l)
		for _, h := range u.Hosts {
			host, port := splitHostPort(h)
			// The hosts of an unknown client are a set: one request each
			// is drawn, the total is in the tooltip.
			addEdge(l, host, auditlog.ClassDeny, port, 1)
		}
	}
	for _, h := range hosts {
		g.Right = append(g.Right, h)
	}
	g.Left, g.HiddenLeft = top(g.Left, maxLeftNodes, nil)
	g.Right, g.HiddenRight = top(g.Right, maxRightNodes, func(a, b *gnode) int { return strings.Compare(a.Label, b.Label) })
	shown := map[*gnode]bool{}
	for _, n := range append(slices.Clone(g.Left), g.Right...) {
		shown[n] = true
	}
	for k, e := range edges {
		if !shown[e.From] || !shown[e.To] {
			continue
		}
		e.Ports = strings.Join(ports[[2]string{k.left.ID, k.host}], ", ")
		g.Edges = append(g.Edges, e)
	}
	slices.SortFunc(g.Edges, func(a, b *gedge) int {
		return cmp.Or(strings.Compare(a.From.ID, b.From.ID), strings.Compare(a.To.ID, b.To.ID), strings.Compare(a.Class, b.Class))
	})
	g.Redirects = slices.DeleteFunc(g.Redirects, func(r *gredirect) bool { return !shown[r.From] || !shown[r.To] })
	g.layout()
	return g
}

// top keeps the n nodes with the most requests, in their original order
// (or sorted by order when given), and says how many it left out.
func top(nodes []*gnode, n int, order func(a, b *gnode) int) ([]*gnode, int) {
	hidden := 0
	if len(nodes) > n {
		byReq := slices.Clone(nodes)
		slices.SortStableFunc(byReq, func(a, b *gnode) int { return cmp.Compare(b.Requests, a.Requests) })
		keep := map[*gnode]bool{}
		for _, x := range byReq[:n] {
			keep[x] = true
		}
		hidden = len(nodes) - n
		nodes = slices.DeleteFunc(nodes, func(x *gnode) bool { return !keep[x] })
	}
	if order != nil {
		slices.SortFunc(nodes, order)
	}
	return nodes, hidden
}

// layout places the columns and draws the edges as cubic curves, offset a
// little by class so that an allowed and a denied edge between the same
// nodes stay apart.
func (g *graph) layout() {
	rows := max(len(g.Left), len(g.Right), 1)
	g.Width = graphWidth
	if len(g.Redirects) > 0 {
		g.Width += redirectRoom
	}
	g.Height = graphTop + rows*rowH + 16
	g.RightX = graphWidth - nodeW - 8
	place := func(col []*gnode, x int) {
		span := float64(rows * rowH)
		step := span / float64(max(len(col), 1))
		for i, n := range col {
			n.X = x
			n.Y = graphTop + int(float64(i)*step+step/2) - nodeH/2
		}
	}
	place(g.Left, 8)
	place(g.Right, g.RightX)
	offset := map[string]int{auditlog.ClassAllow: 0, auditlog.ClassDeny: 4, auditlog.ClassWouldDeny: -4}
	for _, e := range g.Edges {
		x1, y1 := e.From.X+nodeW, e.From.Y+nodeH/2+offset[e.Class]
		x2, y2 := e.To.X, e.To.Y+nodeH/2+offset[e.Class]
		mid := (x1 + x2) / 2
		e.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, mid, y1, mid, y2, x2, y2)
		e.Width = edgeWidth(e.Count)
	}
	// Arcs leave a host's right side a little above its middle and reach
	// the target a little below, bulging further right one after the
	// other, so that a redirect back and forth stays two arcs.
	for i, r := range g.Redirects {
		x := g.RightX + nodeW
		y1, y2 := r.From.Y+nodeH/2-4, r.To.Y+nodeH/2+4
		bulge := x + 36 + 12*(i%4)
		r.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x, y1, bulge, y1, bulge, y2, x+6, y2)
		// A point wider than an edge of as many requests: an arc is
		// short and dashed, and still has to be seen.
		r.Width = fmt.Sprintf("%.1f", min(2.5+math.Log10(float64(r.Count)), 6))
	}
}

// edgeWidth is the stroke width of an edge of count requests.
func edgeWidth(count int64) string {
	return fmt.Sprintf("%.1f", min(1.5+math.Log10(float64(count)), 6))
}

// splitHostPort splits "host:port" or "[v6]:port"; a bare host has no port.
func splitHostPort(s string) (string, string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, ""
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		return host[1 : len(host)-1], port
	}
	if strings.Contains(host, ":") { // a bare IPv6 address
		return s, ""
	}
	return host, port
}

// edgeColors are the colours of the verdict classes and of redirects, in
// dot and html.
var edgeColors = map[string]string{
	auditlog.ClassAllow:     "#2e7d32",
	auditlog.ClassDeny:      "#c62828",
	auditlog.ClassWouldDeny: "#ef6c00",
	classRedirect:           "#00838f",
}

// classRedirect names redirect arcs (their colour, their SVG class).
const classRedirect = "redirect"
