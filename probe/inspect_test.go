package probe

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startInspectingProxy answers every CONNECT with 200 and then plays an
// inspecting egressd inside the tunnel: TLS with httptest's certificate
// (SAN example.com), and per path egressd's refusals or the origin's own
// answers. It returns its address and the pool that trusts it.
func startInspectingProxy(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	origin := httptest.NewUnstartedServer(nil)
	origin.StartTLS()
	t.Cleanup(origin.Close)
	cert := origin.TLS.Certificates[0]
	pool := x509.NewCertPool()
	pool.AddCert(origin.Certificate())
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(reason string) {
			w.Header().Set("X-Egressd-Reason", reason)
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("egressd: denied " + reason + "\n"))
		}
		switch {
		case r.Header.Get(Header) == "":
			refuse("bad-request")
		case r.URL.Path == "/v1/files":
			refuse("path-not-allowed")
		case r.Method == http.MethodPost:
			refuse("method-not-allowed")
		case r.URL.Path == "/storage-says-no":
			// The origin's own 403, even with a reason egressd never gives.
			w.Header().Set("X-Egressd-Reason", "not-allowlisted")
			http.Error(w, "storage says no", http.StatusForbidden)
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		case r.URL.Path == "/cred/present":
			r.Header.Set("Authorization", "Bearer sk-probe-secret")
			OriginHandler().ServeHTTP(w, r)
		case r.URL.Path == "/cred/absent":
			OriginHandler().ServeHTTP(w, r)
		case r.URL.Path == "/cred/unavailable":
			w.Header().Set("X-Egressd-Reason", "credential-unavailable")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("models list"))
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
					return
				}
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
				req, err := http.ReadRequest(bufio.NewReader(tc))
				if err != nil {
					return
				}
				rec := httptest.NewRecorder()
				inner.ServeHTTP(rec, req)
				_ = rec.Result().Write(tc)
				_ = tc.Close()
			}()
		}
	}()
	return ln.Addr().String(), pool
}

func TestInspect(t *testing.T) {
	addr, pool := startInspectingProxy(t)
	other := x509.NewCertPool() // trusts nothing egressd presents
	r := newRunner(t, Config{Proxy: addr, Timeout: 2 * time.Second, InspectCA: pool,
		CAs: map[string]*x509.CertPool{"wrong.pem": other}})
	check := func(path, method string, expect Expect, reason string) Check {
		return Check{Name: "c", Host: "example.com", Port: 443, Path: path, Method: method, Expect: expect, Reason: reason}
	}
	cred := func(path string) Check {
		c := check(path, "", ExpectAllow, "")
		c.Credential = "Authorization"
		return c
	}
	cases := []struct {
		name     string
		check    Check
		observed Observed
		reason   string
		status   string
		pass     bool
		why      string
	}{
		{"allowed path", check("/v1/models", "", ExpectAllow, ""), Allowed, "", "200", true, ""},
		{"denied path", check("/v1/files", "", ExpectDeny, "path-not-allowed"), Denied, "path-not-allowed", "403", true, ""},
		{"denied method", check("/v1/models", "POST", ExpectDeny, "method-not-allowed"), Denied, "method-not-allowed", "403", true, ""},
		{"denied path, want allowed", check("/v1/files", "", ExpectAllow, ""), Denied, "path-not-allowed", "403", false, "denied (path-not-allowed), want allowed"},
		{"allowed path, want denied", check("/v1/models", "", ExpectDeny, "path-not-allowed"), Allowed, "", "200", false, "allowed by policy, want denied (path-not-allowed)"},
		{"denied for another reason", check("/v1/models", "POST", ExpectDeny, "path-not-allowed"), Denied, "method-not-allowed", "403", false, "denied with reason method-not-allowed, want path-not-allowed"},
		{"the origin's 404 is allowed", check("/missing", "", ExpectAllow, ""), Allowed, "", "404", true, ""},
		{"the origin's 403 is allowed", check("/storage-says-no", "", ExpectAllow, ""), Allowed, "", "403", true, ""},
		{"the origin's 403 is no denial", check("/storage-says-no", "", ExpectDeny, ""), Allowed, "", "403", false, "allowed by policy, want denied"},
		{"credential present", cred("/cred/present"), Allowed, "", "200", true, ""},
		{"credential absent", cred("/cred/absent"), NoDecision, "", "200", false, "without Authorization (the probe origin says absent)"},
		{"no probe origin", cred("/v1/models"), NoDecision, "", "200", false, "point the check at a probe origin"},
		{"credential unavailable", cred("/cred/unavailable"), Denied, "credential-unavailable", "503", false, "denied (credential-unavailable), want allowed"},
		{"untrusted certificate", Check{Name: "c", Host: "example.com", Port: 443, Path: "/v1/models", CA: "wrong.pem", Expect: ExpectAllow}, NoDecision, "", "200", false, "no decision seen: TLS inside the tunnel"},
		{"no CA loaded", Check{Name: "c", Host: "example.com", Port: 443, Path: "/v1/models", CA: "absent.pem", Expect: ExpectAllow}, NoDecision, "", "200", false, "no CA to trust inside the tunnel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := r.runStep(t.Context(), step{tc.check, ViaProxy})
			checkResult(t, res, tc.observed, tc.reason, tc.status, tc.pass, tc.why)
			if strings.Contains(res.Detail+res.Why, "sk-probe-secret") {
				t.Errorf("the result shows the credential's value: %+v", res)
			}
			if tc.observed == Allowed && !strings.Contains(res.Detail, "the origin answered "+tc.status) {
				t.Errorf("detail %q does not report the origin's status", res.Detail)
			}
			if want := "example.com:443" + tc.check.Path; !strings.HasSuffix(res.Target, want) {
				t.Errorf("target %q; want it to end in %q", res.Target, want)
			}
		})
	}
}

func TestParseRequestFields(t *testing.T) {
	ok := []struct {
		name string
		in   string
		want Check
	}{
		{"path alone", "{name: a, host: a.example.com, port: 443, expect: allow, path: /v1/models}",
			Check{Name: "a", Host: "a.example.com", Port: 443, Expect: ExpectAllow, Path: "/v1/models"}},
		{"method, ca, reason", "{name: a, host: a.example.com, port: 443, expect: deny, reason: method-not-allowed, path: /v1/files/, method: POST, ca: ca.pem}",
			Check{Name: "a", Host: "a.example.com", Port: 443, Expect: ExpectDeny, Reason: "method-not-allowed", Path: "/v1/files/", Method: "POST", CA: "ca.pem"}},
		{"root, UTF-8", "{name: a, host: a.example.com, port: 443, expect: allow, path: /bücher}",
			Check{Name: "a", Host: "a.example.com", Port: 443, Expect: ExpectAllow, Path: "/bücher"}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("p.yaml", []byte("checks: ["+tc.in+"]"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
		})
	}
	bad := []struct{ name, in, want string }{
		{"relative path", "path: v1/models", "not an absolute path"},
		{"query", "path: '/v1/models?x=1'", "no query"},
		{"dot segment", "path: /v1/../admin", `".." segment`},
		{"empty segment", "path: /v1//models", "empty segment"},
		{"escape egressd decodes", "path: /v1/%6dodels", `write it as egressd decides it: "/v1/models"`},
		{"encoded slash", "path: /v1%2Fmodels", "encoded"},
		{"lower-case method", "path: /v1, method: get", "upper-case method"},
		{"CONNECT", "path: /v1, method: CONNECT", "upper-case method"},
		{"method without path", "method: POST", "method: \"POST\": only a check with a path"},
		{"ca without path", "ca: ca.pem", "ca: \"ca.pem\": only a check with a path"},
		{"credential without path", "credential: Authorization", "only a check with a path"},
		{"credential egressd owns", "path: /v1, credential: Proxy-Authorization", "egressd owns"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("checks: [{name: a, host: a.example.com, port: 443, expect: allow, "+tc.in+"}]"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want it to say %q", err, tc.want)
			}
		})
	}
}

func TestLoadCAs(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "empty.pem")
	origin := httptest.NewTLSServer(nil)
	t.Cleanup(origin.Close)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: origin.Certificate().Raw})
	if err := os.WriteFile(good, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cas  []string
		want string // error substring; empty: loads
	}{
		{"one file, twice", []string{good, good}, ""},
		{"no certificate", []string{good, empty}, "no PEM certificate"},
		{"missing file", []string{filepath.Join(dir, "absent.pem")}, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var checks []Check
			for _, ca := range tc.cas {
				checks = append(checks, Check{Name: "c", Path: "/", CA: ca})
			}
			pools, err := LoadCAs(checks)
			if tc.want == "" {
				if err != nil || len(pools) != 1 || pools[good] == nil {
					t.Fatalf("pools %v, %v", pools, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}
