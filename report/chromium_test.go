package report

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium is Debian's package (scripts/deps/browser.sh installs it).
const chromium = "/usr/bin/chromium"

// TestHTMLInChromium opens the HTML report in headless Chromium: the page
// renders with its SVG graph (nodes and coloured edges in the DOM and on
// the screenshot), and the page makes no network request. The host
// resolver of the browser resolves nothing, so the browser's own
// background requests (update checks, network time) cannot leave the
// machine either; the net log tells the page's requests (initiated by the
// file:// page) from those. A control page with an external image proves
// that the net log check sees a request when there is one, and the same
// image injected into the report proves its Content-Security-Policy
// blocks it.
//
// The screenshot is kept with go test -artifacts (t.ArtifactDir).
func TestHTMLInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("headless Chromium is required: %v (run scripts/deps/browser.sh as root)", err)
	}
	rep, err := Build(Config{Policies: fixturePolicies(t)}, fixtureInputs(t))
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Render(&page, rep, "html"); err != nil {
		t.Fatal(err)
	}
	g := buildGraph(rep)
	dir := t.ArtifactDir()
	pagePath := filepath.Join(dir, "report.html")
	writeTestFile(t, pagePath, page.Bytes())
	// An address nothing answers (the resolver rules resolve nothing
	// anyway): the request is attempted, and logged, but no packet leaves.
	const external = `<img src="http://external.invalid/pixel.png" alt="">`

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(dir, "report.png")
		netlog := runChromium(t, "--window-size=1280,1600", "--screenshot="+shot, "file://"+pagePath)
		if reqs := pageRequests(t, netlog); len(reqs) > 0 {
			t.Errorf("the page made network requests: %v", reqs)
		}
		t.Logf("screenshot: %s", shot)
		checkScreenshot(t, shot)
	})

	t.Run("dom", func(t *testing.T) {
		dom := runChromiumOutput(t, "--dump-dom", "file://"+pagePath)
		if !strings.Contains(dom, "<svg") {
			t.Fatal("no <svg> in the rendered DOM")
		}
		nodes := strings.Count(dom, `<g class="node">`)
		edges := strings.Count(dom, `<path class="edge `)
		if nodes != len(g.Left)+len(g.Right) || nodes == 0 {
			t.Errorf("%d nodes in the DOM, want %d", nodes, len(g.Left)+len(g.Right))
		}
		if edges != len(g.Edges) || edges == 0 {
			t.Errorf("%d edges in the DOM, want %d", edges, len(g.Edges))
		}
		for _, n := range append(g.Left, g.Right...) {
			if !strings.Contains(dom, ">"+truncLeft(n.Label, 38)+"<") {
				t.Errorf("node %q not drawn", n.Label)
			}
		}
		// The fixture's inspected tunnel recorded a 302 from the model
		// host to the blob host: one arc, titled with both.
		if arcs := strings.Count(dom, `<path class="redirect" `); arcs != len(g.Redirects) || arcs != 1 {
			t.Errorf("%d redirect arcs in the DOM, want %d (and the fixture's 1)", arcs, len(g.Redirects))
		}
		for _, r := range g.Redirects {
			if title := "<title>redirect: " + r.From.Label + " → " + r.To.Label + " ("; !strings.Contains(dom, title) {
				t.Errorf("no redirect arc titled %q", title)
			}
		}
	})

	// Issue 23: the page fits a 1280 px window without horizontal page
	// scroll. A copy of the page whose CSP lets one inline script run
	// writes the document's scroll width and the viewport's into the DOM.
	t.Run("fits 1280 px", func(t *testing.T) {
		measured := filepath.Join(dir, "measured.html")
		b := bytes.Replace(page.Bytes(), []byte("style-src 'unsafe-inline'"), []byte("style-src 'unsafe-inline'; script-src 'unsafe-inline'"), 1)
		b = bytes.Replace(b, []byte("</body>"), []byte(`<script>document.body.setAttribute("data-width", document.documentElement.scrollWidth + " " + window.innerWidth)</script></body>`), 1)
		writeTestFile(t, measured, b)
		dom := runChromiumOutput(t, "--window-size=1280,1600", "--dump-dom", "file://"+measured)
		m := regexp.MustCompile(`data-width="(\d+) (\d+)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatal("the measuring script did not run")
		}
		doc, _ := strconv.Atoi(m[1])
		view, _ := strconv.Atoi(m[2])
		if view < 1000 || view > 1280 || doc > view {
			t.Errorf("document %d px wide in a %d px viewport: want it to fit (the window is 1280 px)", doc, view)
		}
		t.Logf("document %d px, viewport %d px", doc, view)
	})

	t.Run("control page without CSP is seen fetching", func(t *testing.T) {
		control := filepath.Join(dir, "control.html")
		writeTestFile(t, control, []byte("<!DOCTYPE html><html><body>"+external+"<p>control</p></body></html>"))
		reqs := pageRequests(t, runChromium(t, "--window-size=400,300", "--screenshot="+filepath.Join(t.TempDir(), "c.png"), "file://"+control))
		if len(reqs) != 1 || !strings.Contains(reqs[0], "external.invalid") {
			t.Errorf("the net log check missed the control page's request: %v", reqs)
		}
	})

	t.Run("CSP blocks an injected fetch", func(t *testing.T) {
		injected := filepath.Join(dir, "injected.html")
		writeTestFile(t, injected, bytes.Replace(page.Bytes(), []byte("<h1>"), []byte(external+"<h1>"), 1))
		reqs := pageRequests(t, runChromium(t, "--window-size=400,300", "--screenshot="+filepath.Join(t.TempDir(), "i.png"), "file://"+injected))
		if len(reqs) > 0 {
			t.Errorf("the report's Content-Security-Policy let a request through: %v", reqs)
		}
	})
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// chromiumArgs are the flags of every run: headless, nothing of the
// browser's own (sync, updates, first-run) and a host resolver that
// resolves nothing.
func chromiumArgs(t *testing.T) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--host-resolver-rules=MAP * ~NOTFOUND",
	}
}

// runChromium runs Chromium with a net log and returns the log's path.
func runChromium(t *testing.T, args ...string) string {
	t.Helper()
	netlog := filepath.Join(t.TempDir(), "netlog.json")
	runChromiumOutput(t, append([]string{"--log-net-log=" + netlog}, args...)...)
	return netlog
}

func runChromiumOutput(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append(chromiumArgs(t), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// pageRequests returns the URLs of the requests the page made, from a
// Chromium net log: URL requests that a document initiated or that belong
// to the file:// page's network isolation key. The browser's own
// background requests carry the initiator "not an origin".
func pageRequests(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var log struct {
		Constants struct {
			LogEventTypes map[string]int `json:"logEventTypes"`
		} `json:"constants"`
		Events []struct {
			Type   int `json:"type"`
			Params struct {
				URL        string `json:"url"`
				Initiator  string `json:"initiator"`
				NetworkKey string `json:"network_isolation_key"`
			} `json:"params"`
		} `json:"events"`
	}
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatalf("net log %s: %v", path, err)
	}
	start, ok := log.Constants.LogEventTypes["URL_REQUEST_START_JOB"]
	if !ok {
		t.Fatal("the net log names no URL_REQUEST_START_JOB event type")
	}
	var out []string
	for _, e := range log.Events {
		p := e.Params
		if e.Type != start || p.URL == "" {
			continue
		}
		if p.Initiator != "not an origin" || strings.Contains(p.NetworkKey, "file://") {
			out = append(out, p.URL)
		}
	}
	return out
}

// checkScreenshot checks that the screenshot is not blank and shows the
// graph: node fills and edges of every verdict class in the fixture, and
// the redirect arc right of the hosts' column (so the legend's sample of
// its colour does not count).
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]uint8{
		"allowed edge":    {0x2e, 0x7d, 0x32},
		"denied edge":     {0xc6, 0x28, 0x28},
		"would-deny edge": {0xef, 0x6c, 0x00},
		"workload node":   {0xe3, 0xf2, 0xfd},
		"host node":       {0xf3, 0xe5, 0xf5},
	}
	redirect := [3]uint8{0x00, 0x83, 0x8f}
	counts := map[string]int{}
	colors := map[[3]uint8]bool{}
	hostsRight := -1 // the rightmost pixel of a host node's fill
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgb(img, x, y)
			colors[c] = true
			for name, w := range want {
				if near(c, w, 24) {
					counts[name]++
				}
			}
			if near(c, want["host node"], 4) {
				hostsRight = max(hostsRight, x)
			}
		}
	}
	arc := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := hostsRight + 1; hostsRight >= 0 && x < b.Max.X; x++ {
			if near(rgb(img, x, y), redirect, 24) {
				arc++
			}
		}
	}
	// The arrowhead alone is about 30 pixels: want the dashed line too.
	t.Logf("redirect arc: %d pixels", arc)
	if arc < 70 {
		t.Errorf("redirect arc: %d pixels of its colour right of the hosts (x > %d), want at least 70", arc, hostsRight)
	}
	if len(colors) < 16 {
		t.Fatalf("the screenshot is blank: %d distinct colours", len(colors))
	}
	for name := range want {
		min := 40
		if strings.HasSuffix(name, "node") {
			min = 5000
		}
		if counts[name] < min {
			t.Errorf("%s: %d pixels of its colour on the screenshot, want at least %d", name, counts[name], min)
		}
	}
}

func rgb(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

func near(a, b [3]uint8, tol int) bool {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < -tol || d > tol {
			return false
		}
	}
	return true
}
