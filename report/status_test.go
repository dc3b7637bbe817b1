package report

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/egressd/egressd/auditlog"
)

// TestHTTPStatusPerHost: the statuses of plain HTTP records and of the
// exchanges of inspected tunnels are counted per destination; a tunnel
// record, which has none, adds nothing.
func TestHTTPStatusPerHost(t *testing.T) {
	const pod = `"client":{"ip":"10.0.0.7","namespace":"llm-prod","pod":"llm-0","workload":{"kind":"Deployment","name":"llm"}}`
	lines := []string{
		`{"time":"2026-07-01T10:00:01Z","id":"t1","kind":"connect",` + pod + `,"host":"api.example.com","port":443,"verdict":"allow","reason":"allowed","tls":{"result":"established","inspected":true},"requests":3,"outcome":"ok"}`,
		`{"time":"2026-07-01T10:00:00Z","id":"a","kind":"inspected","tunnel":"t1",` + pod + `,"host":"api.example.com","port":443,"verdict":"allow","reason":"allowed","http":{"method":"GET","status":200,"proto":"HTTP/2.0"},"bytes_received":500,"outcome":"ok"}`,
		`{"time":"2026-07-01T10:00:00Z","id":"b","kind":"inspected","tunnel":"t1",` + pod + `,"host":"api.example.com","port":443,"verdict":"allow","reason":"allowed","http":{"method":"GET","status":404,"proto":"HTTP/2.0"},"outcome":"ok"}`,
		`{"time":"2026-07-01T10:00:00Z","id":"c","kind":"inspected","tunnel":"t1",` + pod + `,"host":"api.example.com","port":443,"verdict":"allow","reason":"allowed","http":{"method":"GET","status":200,"proto":"HTTP/2.0"},"outcome":"ok"}`,
		`{"time":"2026-07-01T10:00:00Z","id":"d","kind":"http",` + pod + `,"host":"mirror.example.com","port":80,"verdict":"allow","reason":"allowed","http":{"method":"GET","status":302,"redirect_host":"files.example.net"},"outcome":"ok"}`,
	}
	rep, err := Build(Config{}, []auditlog.Input{{Name: "-", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(strings.Join(lines, "\n") + "\n")), nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{}
	for _, w := range rep.Workloads {
		for _, d := range w.Destinations {
			got[d.Host] = d.HTTPStatus
			// The tunnel's record counts the bytes on the wire; an
			// exchange inside it adds none.
			if d.Host == "api.example.com" && d.BytesReceived != 0 {
				t.Errorf("api.example.com received %d bytes, want 0 (the tunnel's)", d.BytesReceived)
			}
		}
	}
	for _, tt := range []struct {
		host string
		want map[string]int64
	}{
		{"api.example.com", map[string]int64{"200": 2, "404": 1}},
		{"mirror.example.com", map[string]int64{"302": 1}},
	} {
		t.Run(tt.host, func(t *testing.T) {
			if g := got[tt.host]; len(g) != len(tt.want) || g["200"] != tt.want["200"] || g["404"] != tt.want["404"] || g["302"] != tt.want["302"] {
				t.Fatalf("http_status of %s = %v; want %v", tt.host, g, tt.want)
			}
		})
	}
}

// TestRedirects: a 3xx naming http.redirect_host is a redirect of its
// workload, from plain HTTP and from inside an inspected tunnel; a
// redirect_host on another status is not, and workloads keep their own.
func TestRedirects(t *testing.T) {
	client := func(pod, name string) string {
		return `"client":{"ip":"10.0.0.7","namespace":"llm-prod","pod":"` + pod + `","workload":{"kind":"Deployment","name":"` + name + `"}}`
	}
	rec := func(id, kind, c, host string, status int, to string) string {
		return `{"time":"2026-07-01T10:00:00Z","id":"` + id + `","kind":"` + kind + `",` + c + `,"host":"` + host +
			`","port":443,"verdict":"allow","reason":"allowed","http":{"method":"GET","status":` + itoa(int64(status)) +
			`,"redirect_host":"` + to + `"},"outcome":"ok"}`
	}
	llm, ui := client("llm-0", "llm"), client("ui-0", "ui")
	lines := []string{
		rec("a", "inspected", llm, "models.example.com", 302, "eu1.blob.example.net"),
		rec("b", "inspected", llm, "models.example.com", 307, "eu1.blob.example.net"),
		rec("c", "http", llm, "mirror.example.com", 301, "files.example.net"),
		rec("d", "inspected", llm, "models.example.com", 200, "eu2.blob.example.net"),
		rec("e", "inspected", ui, "models.example.com", 302, "eu1.blob.example.net"),
	}
	rep, err := Build(Config{}, []auditlog.Input{{Name: "-", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(strings.Join(lines, "\n") + "\n")), nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]Redirect{}
	for _, w := range rep.Workloads {
		for _, r := range w.Redirects {
			got[w.Name] = append(got[w.Name], *r)
		}
	}
	for _, tt := range []struct {
		workload string
		want     []Redirect
	}{
		{"llm", []Redirect{{"mirror.example.com", "files.example.net", 1}, {"models.example.com", "eu1.blob.example.net", 2}}},
		{"ui", []Redirect{{"models.example.com", "eu1.blob.example.net", 1}}},
	} {
		t.Run(tt.workload, func(t *testing.T) {
			if !slices.Equal(got[tt.workload], tt.want) {
				t.Errorf("redirects of %s = %v; want %v", tt.workload, got[tt.workload], tt.want)
			}
		})
	}
	g := buildGraph(rep)
	if len(g.Redirects) != 3 {
		t.Errorf("%d redirect arcs in the graph, want 3 (one per workload and redirect)", len(g.Redirects))
	}
}
