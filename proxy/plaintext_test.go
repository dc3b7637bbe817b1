package proxy

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
)

func TestParseHTTPHead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		wantErr   error
		authority string
		hosts     []string
	}{
		{"origin form", "GET / HTTP/1.1\r\nHost: models.test\r\n\r\n", nil, "", []string{"models.test"}},
		{"bare LF line ends", "GET / HTTP/1.1\nHost: models.test\n\n", nil, "", []string{"models.test"}},
		{"body bytes after the head", "POST /e HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", nil, "", []string{"a"}},
		{"absolute form", "GET http://evil.test/x HTTP/1.1\r\nHost: models.test\r\n\r\n", nil, "evil.test", []string{"models.test"}},
		{"CONNECT inside the tunnel", "CONNECT evil.test:443 HTTP/1.1\r\nHost: models.test\r\n\r\n", nil, "evil.test:443", []string{"models.test"}},
		{"leading empty lines are skipped (RFC 9112 §2.2)", "\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", nil, "", []string{"evil.test"}},
		{"lower-case method and tab", "get\t/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", nil, "", []string{"evil.test"}},
		{"two Host fields", "GET / HTTP/1.1\r\nHost: models.test\r\nhost: evil.test\r\n\r\n", nil, "", []string{"models.test", "evil.test"}},
		{"no Host", "GET / HTTP/1.0\r\n\r\n", nil, "", nil},
		{"HTTP/0.9", "GET /\r\n", nil, "", nil},
		{"incomplete request line", "GET /x", sniff.ErrNeedMore, "", nil},
		{"incomplete method", "GE", sniff.ErrNeedMore, "", nil},
		{"incomplete head", "GET / HTTP/1.1\r\nHost: models.test\r\n", sniff.ErrNeedMore, "", nil},
		{"only empty lines so far", "\r\n\r\n", sniff.ErrNeedMore, "", nil},
		{"space before the colon is read as Host", "GET / HTTP/1.1\r\nHost : evil.test\r\n\r\n", nil, "", []string{"evil.test"}},
		{"header line without colon", "GET / HTTP/1.1\r\nHost models.test\r\n\r\n", sniff.ErrBadHead, "", nil},
		{"version but no target", "GET HTTP/1.1\r\n\r\n", sniff.ErrBadHead, "", nil},
		{"head over the limit", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 300) + "\r\n\r\n", sniff.ErrBadHead, "", nil},
		{"line over the limit", "GET /" + strings.Repeat("a", 300), sniff.ErrBadHead, "", nil},
		{"SSH banner", "SSH-2.0-OpenSSH_9.2\r\n", sniff.ErrNotHTTP, "", nil},
		{"SMTP EHLO", "EHLO client.example\r\n", sniff.ErrNotHTTP, "", nil},
		{"binary", "\x00\x01\x02", sniff.ErrNotHTTP, "", nil},
		{"starts with a space", " GET / HTTP/1.1\r\n\r\n", sniff.ErrNotHTTP, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := sniff.ParseHTTPHead([]byte(tc.in), 256)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && (h.Authority != tc.authority || !slices.Equal(h.Hosts, tc.hosts)) {
				t.Fatalf("got %+v", h)
			}
		})
	}
}

func TestCheckPlainHead(t *testing.T) {
	allowed := policy.Decision{Verdict: policy.Allow, Reason: policy.ReasonAllowed, Mode: policy.ModeEnforce, Policy: "ns/p"}
	audit := allowed
	audit.Mode = policy.ModeAudit
	for _, tc := range []struct {
		name      string
		head      sniff.HTTPHead
		d         policy.Decision
		verdict   policy.Verdict
		reason    policy.Reason
		wouldDeny bool
	}{
		{"Host names the CONNECT host", sniff.HTTPHead{Method: "GET", Hosts: []string{"models.test"}}, allowed, policy.Allow, policy.ReasonAllowed, false},
		{"upper case and trailing dot", sniff.HTTPHead{Method: "GET", Hosts: []string{"MODELS.test."}}, allowed, policy.Allow, policy.ReasonAllowed, false},
		{"the CONNECT port", sniff.HTTPHead{Method: "GET", Hosts: []string{"models.test:8080"}}, allowed, policy.Allow, policy.ReasonAllowed, false},
		{"another port", sniff.HTTPHead{Method: "GET", Hosts: []string{"models.test:80"}}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"another host", sniff.HTTPHead{Method: "GET", Hosts: []string{"evil.test"}}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"absolute form names another host", sniff.HTTPHead{Method: "GET", Authority: "evil.test", Hosts: []string{"models.test"}}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"second Host names another host", sniff.HTTPHead{Method: "GET", Hosts: []string{"models.test", "evil.test"}}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"no Host", sniff.HTTPHead{Method: "GET"}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"empty Host", sniff.HTTPHead{Method: "GET", Hosts: []string{""}}, allowed, policy.Deny, policy.ReasonHostMismatch, false},
		{"audit mode softens", sniff.HTTPHead{Method: "GET", Hosts: []string{"evil.test"}}, audit, policy.Allow, policy.ReasonHostMismatch, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := checkPlainHead(tc.d, &tc.head, "models.test", 8080)
			if d.Verdict != tc.verdict || d.Reason != tc.reason || d.WouldDeny != tc.wouldDeny || d.Policy != "ns/p" {
				t.Fatalf("decision %+v", d)
			}
			if (err != nil) != (tc.verdict == policy.Deny) {
				t.Fatalf("err %v with verdict %s", err, d.Verdict)
			}
		})
	}
}

// TestConnectPlaintextHost: plaintext HTTP inside a CONNECT tunnel must
// name the CONNECT host; another Host is refused before a byte reaches the
// origin (a virtual host behind an allowed address is another site).
func TestConnectPlaintextHost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      policy.Mode
		send      string // {port}: the origin's
		chunk     int    // write in pieces of this size; 0: one write
		relayed   bool
		verdict   string
		reason    string
		wouldDeny bool
	}{
		{"Host names the CONNECT host", "", "GET /echo HTTP/1.1\r\nHost: models.test:{port}\r\nConnection: close\r\n\r\n", 0, true, "allow", "allowed", false},
		{"Host without port", "", "GET /echo HTTP/1.1\r\nHost: Models.Test\r\nConnection: close\r\n\r\n", 0, true, "allow", "allowed", false},
		{"head trickled a byte at a time", "", "GET /echo HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n", 1, true, "allow", "allowed", false},
		{"another Host", "", "GET /echo HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"another Host, trickled", "", "GET /echo HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", 3, false, "deny", "host-mismatch", false},
		{"another port", "", "GET /echo HTTP/1.1\r\nHost: models.test:1\r\nConnection: close\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"absolute form names another host", "", "GET http://evil.test/echo HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"empty lines before the request", "", "\r\n\r\nGET /echo HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"HTTP/1.0 without Host", "", "GET /echo HTTP/1.0\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"HTTP/0.9", "", "GET /echo\r\n", 0, false, "deny", "host-mismatch", false},
		{"space before the colon", "", "GET /echo HTTP/1.1\r\nHost : evil.test\r\n\r\n", 0, false, "deny", "host-mismatch", false},
		{"malformed header", "", "GET /echo HTTP/1.1\r\nHost models.test\r\n\r\n", 0, false, "deny", "bad-request", false},
		{"audit mode: would_deny, relayed", policy.ModeAudit, "GET /echo HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", 0, true, "allow", "host-mismatch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{mode: tc.mode})
			c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", e.httpPort))
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			send := strings.ReplaceAll(tc.send, "{port}", fmt.Sprint(e.httpPort))
			go func() {
				if tc.chunk == 0 {
					io.WriteString(c, send)
					return
				}
				for b := send; len(b) > 0; b = b[min(tc.chunk, len(b)):] {
					if _, err := io.WriteString(c, b[:min(tc.chunk, len(b))]); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			got, _ := io.ReadAll(c)
			c.Close()
			r := e.sink.next(t)
			if relayed := strings.Contains(string(got), "200 OK"); relayed != tc.relayed {
				t.Fatalf("relayed %v, want %v: %q", relayed, tc.relayed, got)
			}
			if !tc.relayed {
				select {
				case h := <-e.seen:
					t.Fatalf("the origin saw a request for %q", h.Get("X-Seen-Host"))
				default:
				}
				if r.BytesSent != 0 {
					t.Fatalf("%d bytes sent upstream", r.BytesSent)
				}
			}
			if r.Verdict != tc.verdict || r.Reason != tc.reason || r.WouldDeny != tc.wouldDeny {
				t.Fatalf("record verdict %q reason %q would_deny %v error %q", r.Verdict, r.Reason, r.WouldDeny, r.Error)
			}
			if r.TLS == nil || r.TLS.Result != "not-tls" {
				t.Fatalf("record tls %+v", r.TLS)
			}
		})
	}
}

// TestConnectPlaintextCurl: curl -p (--proxytunnel) sends plain HTTP in a
// CONNECT tunnel; it names the CONNECT host and passes.
func TestConnectPlaintextCurl(t *testing.T) {
	e := newEnv(t, envOpt{})
	out, stderr, err := curl(t, "-f", "-p", "--proxy", "http://"+e.addr, "--interface", podIP,
		fmt.Sprintf("http://models.test:%d/w.bin", e.httpPort))
	if err != nil {
		t.Fatalf("curl: %v: %s", err, stderr)
	}
	if out != string(weights) {
		t.Fatalf("body: got %d bytes, want %d", len(out), len(weights))
	}
	r := e.sink.next(t)
	if r.Reason != "allowed" || r.TLS == nil || r.TLS.Result != "not-tls" || r.BytesReceived < int64(len(weights)) {
		t.Fatalf("record %+v", r)
	}
}

func FuzzHTTPHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: models.test\r\n\r\n",
		"\r\nGET /\r\n",
		"CONNECT a:1 HTTP/1.1\r\n\r\n",
		"SSH-2.0-x\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := sniff.ParseHTTPHead(b, 1024)
		if err != nil {
			for _, s := range []error{sniff.ErrNeedMore, sniff.ErrNotHTTP, sniff.ErrBadHead} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("unclassified error %v", err)
		}
		if len(h.Method) == 0 || len(h.Method) > len(b) {
			t.Fatalf("method %q", h.Method)
		}
		// A complete head stays complete whatever follows it (a body).
		h2, err := sniff.ParseHTTPHead(append(append([]byte(nil), b...), "xyz"...), 1024+3)
		if err != nil || !slices.Equal(h.Hosts, h2.Hosts) || h.Authority != h2.Authority {
			t.Fatalf("appending bytes changed the head: %+v %v", h2, err)
		}
		// The check never allows a head that names nothing.
		if len(h.Hosts) == 0 && h.Authority == "" {
			d := policy.Decision{Verdict: policy.Allow, Mode: policy.ModeEnforce}
			if d, _ := checkPlainHead(d, &h, "models.test", 80); d.Allowed() {
				t.Fatal("a head without a name passed")
			}
		}
	})
}
