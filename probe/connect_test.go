package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProxy answers CONNECTs on 127.0.0.1 as egressd would, by target
// host, and remembers what each request carried. It dials nothing.
type fakeProxy struct {
	addr string
	mu   sync.Mutex
	seen map[string]*http.Request // by Egressd-Probe value
}

func startFakeProxy(t *testing.T) *fakeProxy {
	t.Helper()
	fp := &fakeProxy{seen: map[string]*http.Request{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fp.addr = ln.Addr().String()
	refuse := func(w http.ResponseWriter, status int, reason string) {
		if reason != "" {
			w.Header().Set("X-Egressd-Reason", reason)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "egressd: denied for llm-prod/llm-0: %s\nsecond line\n", reason)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp.mu.Lock()
		fp.seen[r.Header.Get(Header)] = r
		fp.mu.Unlock()
		if r.Method != http.MethodConnect {
			refuse(w, http.StatusBadRequest, "bad-request")
			return
		}
		host, _, _ := net.SplitHostPort(r.Host)
		switch host {
		case "allow.test", "192.0.2.1", "2001:db8::1":
			w.WriteHeader(http.StatusOK)
		case "deny.test":
			refuse(w, http.StatusForbidden, "not-allowlisted")
		case "invalid.test":
			refuse(w, http.StatusBadRequest, "invalid-host")
		case "dialfail.test":
			refuse(w, http.StatusBadGateway, "dial-failed")
		case "slow.test":
			refuse(w, http.StatusGatewayTimeout, "dial-failed")
		case "limit.test":
			refuse(w, http.StatusTooManyRequests, "too-many-connections")
		case "draining.test":
			refuse(w, http.StatusServiceUnavailable, "dial-failed")
		case "foreign.test":
			refuse(w, http.StatusForbidden, "")
		case "auth.test":
			w.Header().Set("Proxy-Authenticate", "Basic")
			w.WriteHeader(http.StatusProxyAuthRequired)
		case "hang.test":
			<-r.Context().Done()
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fp
}

func (fp *fakeProxy) request(name string) *http.Request {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.seen[name]
}

func newRunner(t *testing.T, cfg Config) *Runner {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConnect(t *testing.T) {
	fp := startFakeProxy(t)
	r := newRunner(t, Config{Proxy: fp.addr, Timeout: 2 * time.Second, UserAgent: "egressd-probe/test"})
	cases := []struct {
		name     string
		check    Check
		observed Observed
		reason   string
		status   string
		pass     bool
		why      string // substring of Why
	}{
		{"allowed", Check{Host: "allow.test", Port: 443, Expect: ExpectAllow}, Allowed, "", "200", true, ""},
		{"allowed IPv4 literal", Check{Host: "192.0.2.1", Port: 443, Expect: ExpectAllow}, Allowed, "", "200", true, ""},
		{"allowed IPv6 literal", Check{Host: "2001:db8::1", Port: 443, Expect: ExpectAllow}, Allowed, "", "200", true, ""},
		{"allowed, want denied", Check{Host: "allow.test", Port: 443, Expect: ExpectDeny, Reason: "metadata"}, Allowed, "", "200", false, "allowed by policy, want denied (metadata)"},
		{"denied, any reason", Check{Host: "deny.test", Port: 443, Expect: ExpectDeny}, Denied, "not-allowlisted", "403", true, ""},
		{"denied, the reason wanted", Check{Host: "deny.test", Port: 443, Expect: ExpectDeny, Reason: "not-allowlisted"}, Denied, "not-allowlisted", "403", true, ""},
		{"denied, another reason", Check{Host: "deny.test", Port: 443, Expect: ExpectDeny, Reason: "metadata"}, Denied, "not-allowlisted", "403", false, "denied with reason not-allowlisted, want metadata"},
		{"denied, want allowed", Check{Host: "deny.test", Port: 443, Expect: ExpectAllow}, Denied, "not-allowlisted", "403", false, "denied (not-allowlisted), want allowed"},
		{"400 with a reason is a refusal", Check{Host: "invalid.test", Port: 443, Expect: ExpectDeny, Reason: "invalid-host"}, Denied, "invalid-host", "400", true, ""},
		{"502: allowed, upstream failed", Check{Host: "dialfail.test", Port: 443, Expect: ExpectAllow}, UpstreamFailed, "dial-failed", "502", true, "allowed by policy; the upstream failed: 502 dial-failed"},
		{"504: allowed, upstream failed", Check{Host: "slow.test", Port: 443, Expect: ExpectAllow}, UpstreamFailed, "dial-failed", "504", true, "upstream failed"},
		{"502 does not meet deny", Check{Host: "dialfail.test", Port: 443, Expect: ExpectDeny}, UpstreamFailed, "dial-failed", "502", false, "allowed by policy, want denied"},
		{"429: no decision", Check{Host: "limit.test", Port: 443, Expect: ExpectDeny}, NoDecision, "too-many-connections", "429", false, "no decision seen: 429 too-many-connections"},
		{"503: no decision", Check{Host: "draining.test", Port: 443, Expect: ExpectAllow}, NoDecision, "dial-failed", "503", false, "no decision seen"},
		{"403 without the header is not egressd's", Check{Host: "foreign.test", Port: 443, Expect: ExpectDeny}, NoDecision, "", "403", false, "without X-Egressd-Reason"},
		{"407 is not egressd's", Check{Host: "auth.test", Port: 443, Expect: ExpectDeny}, NoDecision, "", "407", false, "not egressd's answer"},
		{"no answer: timed out", Check{Host: "hang.test", Port: 443, Expect: ExpectDeny}, NoDecision, "", "", false, "timed out"},
	}
	// A short limit for the case that waits for it: the fake proxy never
	// answers hang.test.
	short := newRunner(t, Config{Proxy: fp.addr, Timeout: 200 * time.Millisecond, UserAgent: "egressd-probe/test"})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check.Name = fmt.Sprintf("case-%d", i)
			r := r
			if tc.check.Host == "hang.test" {
				r = short
			}
			res := r.runStep(context.Background(), step{tc.check, ViaProxy})
			checkResult(t, res, tc.observed, tc.reason, tc.status, tc.pass, tc.why)
			req := fp.request(tc.check.Name)
			if req == nil {
				t.Fatalf("the proxy saw no CONNECT with %s: %s", Header, tc.check.Name)
			}
			if want := net.JoinHostPort(tc.check.Host, fmt.Sprint(tc.check.Port)); req.Method != http.MethodConnect || req.Host != want || req.RequestURI != want {
				t.Errorf("request %s %s (Host %s), want CONNECT %s", req.Method, req.RequestURI, req.Host, want)
			}
			if ua := req.UserAgent(); ua != "egressd-probe/test" {
				t.Errorf("User-Agent %q", ua)
			}
		})
	}
	t.Run("body line kept as the detail", func(t *testing.T) {
		res := r.runStep(context.Background(), step{Check{Name: "d", Host: "deny.test", Port: 443, Expect: ExpectDeny}, ViaProxy})
		if res.Detail != "egressd: denied for llm-prod/llm-0: not-allowlisted" {
			t.Errorf("detail %q", res.Detail)
		}
	})
}

func checkResult(t *testing.T, res Result, observed Observed, reason, status string, pass bool, why string) {
	t.Helper()
	if res.Observed != observed || res.Reason != reason || res.Status != status || res.Pass != pass {
		t.Errorf("got %s reason %q status %q pass %v (%s; %s), want %s reason %q status %q pass %v",
			res.Observed, res.Reason, res.Status, res.Pass, res.Why, res.Detail, observed, reason, status, pass)
	}
	if !strings.Contains(res.Why, why) {
		t.Errorf("why %q lacks %q", res.Why, why)
	}
}

func TestConnectProxyUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newRunner(t, Config{Proxy: addr})
	res := r.runStep(context.Background(), step{Check{Name: "a", Host: "allow.test", Port: 443, Expect: ExpectDeny}, ViaProxy})
	checkResult(t, res, NoDecision, "", "", false, "no decision seen: proxy "+addr)
}

func TestConnectFromSource(t *testing.T) {
	var from string
	fp2 := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _, _ = net.SplitHostPort(r.RemoteAddr)
		w.WriteHeader(http.StatusOK)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fp2.Serve(ln) }()
	t.Cleanup(func() { _ = fp2.Close() })
	r := newRunner(t, Config{Proxy: ln.Addr().String(), Source: netip.MustParseAddr("127.0.0.2")})
	res := r.runStep(context.Background(), step{Check{Name: "a", Host: "allow.test", Port: 443, Expect: ExpectAllow}, ViaProxy})
	if !res.Pass || from != "127.0.0.2" {
		t.Errorf("pass %v from %q, want the CONNECT from 127.0.0.2", res.Pass, from)
	}
}

func TestParseProxy(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"http://egressd.llm-prod.svc.cluster.local:3128", "egressd.llm-prod.svc.cluster.local:3128", ""},
		{"http://egressd:3128/", "egressd:3128", ""},
		{"egressd:8080", "egressd:8080", ""},
		{"http://egressd", "egressd:3128", ""},
		{"127.0.0.53", "127.0.0.53:3128", ""},
		{"http://[fd00::53]:3128", "[fd00::53]:3128", ""},
		{"HTTP://egressd:3128", "egressd:3128", ""},
		{"https://egressd:3128", "", "plain http://"},
		{"socks5://egressd:1080", "", "plain http://"},
		{"http://user:pass@egressd:3128", "", "no proxy credentials"},
		{"http://:3128", "", "no host"},
		{"http://egressd:3128/path", "", "nothing after the port"},
		{"http://egressd:99999", "", "port 1-65535"},
		{"http://egressd:0", "", "port 1-65535"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseProxy(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseProxy = %q, %v; want an error with %q", got, err, tc.err)
				}
				if strings.Contains(err.Error(), "pass") && !strings.Contains(tc.in, "pass") {
					t.Errorf("error leaks: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseProxy = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("credentials are not echoed", func(t *testing.T) {
		_, err := ParseProxy("http://user:s3cret@egressd:3128")
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %v echoes the password", err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no proxy", Config{}, "proxy address is required"},
		{"dns without port", Config{Proxy: "a:1", DNS: "127.0.0.53"}, `"127.0.0.53"`},
		{"direct port 0", Config{Proxy: "a:1", Direct: []string{"203.0.113.1:0"}}, "port 1-65535"},
		{"negative timeout", Config{Proxy: "a:1", Timeout: -time.Second}, "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if got := WithDefaultPort("127.0.0.53", "53"); got != "127.0.0.53:53" {
		t.Errorf("WithDefaultPort = %q", got)
	}
	if got := WithDefaultPort("::1", "53"); got != "[::1]:53" {
		t.Errorf("WithDefaultPort(::1) = %q", got)
	}
	if got := WithDefaultPort("egressd:5353", "53"); got != "egressd:5353" {
		t.Errorf("WithDefaultPort kept no port: %q", got)
	}
}
