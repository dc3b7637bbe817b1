package inspect

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Real clients other than Go's through inspected tunnels: curl with
// --cacert over HTTP/1.1 and HTTP/2, and python3's urllib with an ssl
// context on the CA file. Both are installed by scripts/deps/base.sh.

func caFile(t *testing.T, h *harness) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "inspect-ca.pem")
	if err := os.WriteFile(f, h.inspCA.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (scripts/deps/base.sh installs it): %v", name, err)
	}
	return p
}

// TestCurlThroughInspectedTunnel: one curl invocation, one tunnel, an
// allowed path, a denied path, a denied method and the redirect, each
// answered and recorded.
func TestCurlThroughInspectedTunnel(t *testing.T) {
	curl := lookTool(t, "curl")
	for _, proto := range []string{"--http1.1", "--http2"} {
		t.Run(proto, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			ca := caFile(t, h)
			args := []string{"-sS", "--max-time", "20", proto, "--cacert", ca, "--proxy", "http://" + h.proxy.Addr().String(),
				"-H", "Authorization: Bearer sk-client-secret-token",
				"-w", "%{http_code} %{http_version} %header{x-egressd-reason}\n"}
			for _, p := range []string{"/v1/models", "/v1/files", "/dl/weights.bin", "/status/404", "/v1/models"} {
				args = append(args, "-o", os.DevNull, h.originURL(p))
			}
			out, err := exec.Command(curl, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v\n%s", err, out)
			}
			version := map[string]string{"--http1.1": "1.1", "--http2": "2"}[proto]
			want := []string{"200 " + version + " ", "403 " + version + " path-not-allowed", "302 " + version + " ", "404 " + version + " ", "200 " + version + " "}
			got := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(got) != len(want) {
				t.Fatalf("curl printed %q; want %q", got, want)
			}
			for i := range want {
				if strings.TrimSpace(got[i]) != strings.TrimSpace(want[i]) {
					t.Errorf("response %d: %q; want %q", i, got[i], want[i])
				}
			}
			h.wait()
			if len(h.tunnels) != 1 || h.tunnels[0].Requests != 5 {
				t.Fatalf("tunnels %+v; want one with 5 requests", h.tunnels)
			}
			if x := h.exchanges[2]; x.Status != 302 || x.RedirectHost != "blob.example.net" {
				t.Fatalf("redirect exchange %+v", x)
			}
			assertNoSecrets(t, h)
		})
	}
}

// TestCurlExpectContinue: curl's Expect: 100-continue uploads, allowed
// (egressd answers the 100) and refused (403 without the body).
func TestCurlExpectContinue(t *testing.T) {
	curl := lookTool(t, "curl")
	h := newHarness(t, harnessOpts{})
	data := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(data, []byte(strings.Repeat("y", 2<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{"/v1/chat/completions", "200 "},
		{"/v1/files", "403 path-not-allowed"},
	} {
		out, err := exec.Command(curl, "-sS", "--max-time", "20", "--http1.1", "--cacert", caFile(t, h), "--proxy", "http://"+h.proxy.Addr().String(),
			"-H", "Expect: 100-continue", "--expect100-timeout", "10", "--data-binary", "@"+data, "-o", os.DevNull,
			"-w", "%{http_code} %header{x-egressd-reason}", h.originURL(tt.path)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != strings.TrimSpace(tt.want) {
			t.Fatalf("POST %s: %q %v; want %q", tt.path, out, err, tt.want)
		}
	}
	h.wait()
	if len(h.exchanges) != 2 || h.exchanges[0].BytesReceived != 2<<20 || h.exchanges[1].BytesReceived != 0 {
		t.Fatalf("exchanges %+v", h.exchanges)
	}
}

// TestCurlUntrustedOrigin: curl fails, and never sees the origin's
// certificate.
func TestCurlUntrustedOrigin(t *testing.T) {
	curl := lookTool(t, "curl")
	h := newHarness(t, harnessOpts{untrusted: true})
	out, err := exec.Command(curl, "-sS", "--max-time", "20", "--cacert", caFile(t, h), "--proxy", "http://"+h.proxy.Addr().String(),
		h.originURL("/v1/models")).CombinedOutput()
	if err == nil {
		t.Fatalf("curl succeeded past an untrusted origin: %s", out)
	}
	h.wait()
	if len(h.tunnels) != 1 || h.tunnels[0].Outcome != OutcomeUpstreamTLSFailed {
		t.Fatalf("tunnels %+v", h.tunnels)
	}
}

const pythonClient = `
import ssl, sys, urllib.request, urllib.error
proxy, ca = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": proxy}), urllib.request.HTTPSHandler(context=ctx))
for method, url in zip(sys.argv[3::2], sys.argv[4::2]):
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None,
                                 headers={"Authorization": "Bearer sk-client-secret-token"})
    try:
        with opener.open(req, timeout=20) as r:
            print(r.status, "")
    except urllib.error.HTTPError as e:
        print(e.code, e.headers.get("X-Egressd-Reason", ""))
`

// TestPythonThroughInspectedTunnel: python3's urllib (HTTP/1.1, a tunnel
// per request) with the CA file.
func TestPythonThroughInspectedTunnel(t *testing.T) {
	py := lookTool(t, "python3")
	h := newHarness(t, harnessOpts{})
	out, err := exec.Command(py, "-c", pythonClient, "http://"+h.proxy.Addr().String(), caFile(t, h),
		"POST", h.originURL("/v1/chat/completions"),
		"GET", h.originURL("/v1/chat/completions"),
		"GET", h.originURL("/nope"),
		"GET", h.originURL("/dl/forbidden"),
	).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	want := "200 \n403 method-not-allowed\n403 path-not-allowed\n403 \n"
	if string(out) != want {
		t.Fatalf("python3 printed %q; want %q", out, want)
	}
	h.wait()
	if len(h.exchanges) != 4 || h.exchanges[3].Status != 403 || !h.exchanges[3].Verdict.Allow {
		t.Fatalf("exchanges %+v", h.exchanges)
	}
	assertNoSecrets(t, h)
}
