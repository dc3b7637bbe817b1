package admit

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

const testPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: p, namespace: shop}
spec:
  podSelector: {}
  egress:
    - hosts: ["*.example.test"]
      ports: [443]
      cidrs: ["10.1.0.0/16"]
`

type staticIdentity map[netip.Addr]*policy.Client

func (s staticIdentity) Lookup(ip netip.Addr) (*policy.Client, bool) {
	c, ok := s[ip]
	return c, ok
}

type staticLookuper map[string]resolver.Answer

func (l staticLookuper) LookupIP(_ context.Context, host string) (resolver.Answer, error) {
	switch host {
	case "cname-to-metadata.example.test":
		return resolver.Answer{CNAMEs: []string{"metadata.google.internal"}}, resolver.ErrMetadataName
	case "down.example.test":
		return resolver.Answer{}, resolver.ErrUpstream
	}
	return l[host], nil
}

func newTestPipeline(t *testing.T, mode policy.Mode, available bool) (*Pipeline, *policy.Client) {
	t.Helper()
	snap, err := testutil.Snapshot(testPolicy)
	if err != nil {
		t.Fatal(err)
	}
	c := &policy.Client{IP: netip.MustParseAddr("10.244.0.2"), Namespace: "shop", Pod: "web-0"}
	ip := netip.MustParseAddr
	p, err := New(Config{
		Inputs: Inputs{
			Policy:         func() *policy.Snapshot { return snap },
			Identity:       staticIdentity{c.IP: c},
			AuditAvailable: func() bool { return available },
			Mode:           mode,
		},
		Resolver: staticLookuper{
			"api.example.test":   {Addrs: []netip.Addr{ip("169.254.169.254"), ip("169.254.1.1")}},
			"mixed.example.test": {Addrs: []netip.Addr{ip("10.2.0.1"), ip("10.1.0.1")}},
			"empty.example.test": {},
		},
		Guard: policy.NewGuard(policy.GuardConfig{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// TestAdmitOrder: the steps before the lookup refuse in run's order.
func TestAdmitOrder(t *testing.T) {
	p, c := newTestPipeline(t, policy.ModeEnforce, true)
	closed, _ := newTestPipeline(t, policy.ModeEnforce, false)
	for _, tc := range []struct {
		name    string
		p       *Pipeline
		req     Request
		want    policy.Reason
		wantErr error
		host    string
	}{
		{"unknown client before an invalid host", p, Request{Host: "bad..x", Port: 443}, policy.ReasonUnknownClient, nil, "bad..x"},
		{"unknown client before audit availability", closed, Request{Host: "api.example.test", Port: 443}, policy.ReasonUnknownClient, nil, "api.example.test"},
		{"audit unavailable before an invalid host", closed, Request{Client: c, Host: "bad..x", Port: 443}, policy.ReasonAuditUnavailable, ErrAuditUnavailable, "bad..x"},
		{"invalid host", p, Request{Client: c, Host: "bad..x", Port: 443}, policy.ReasonInvalidHost, nil, "bad..x"},
		{"port out of range", p, Request{Client: c, Host: "api.example.test", Port: 0}, policy.ReasonBadRequest, ErrPort, "api.example.test"},
		{"metadata name", p, Request{Client: c, Host: "metadata.google.internal", Port: 80}, policy.ReasonMetadata, nil, "metadata.google.internal"},
		{"normalized and allowed", p, Request{Client: c, Host: "API.Example.Test.", Port: 443}, policy.ReasonAllowed, nil, "api.example.test"},
		{"any port", p, Request{Client: c, Host: "api.example.test", AnyPort: true}, policy.ReasonAllowed, nil, "api.example.test"},
		{"not allowlisted", p, Request{Client: c, Host: "evil.test", Port: 443}, policy.ReasonNotAllowlisted, nil, "evil.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.p.Admit(tc.req)
			if a.Decision.Reason != tc.want || a.Host != tc.host {
				t.Fatalf("Admit = %s host %q, want %s host %q", a.Decision.Reason, a.Host, tc.want, tc.host)
			}
			if tc.wantErr != nil && !errors.Is(a.Err, tc.wantErr) {
				t.Fatalf("err %v, want %v", a.Err, tc.wantErr)
			}
		})
	}
}

// TestRoute: the lookup and the guard, with exactly the addresses to dial.
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      policy.Mode
		host      string
		want      policy.Reason
		wouldDeny bool
		addrs     []string
		err       error
	}{
		{"metadata before link-local", policy.ModeEnforce, "api.example.test", policy.ReasonMetadata, false, nil, nil},
		{"outside cidrs skipped", policy.ModeEnforce, "mixed.example.test", policy.ReasonAllowed, false, []string{"10.1.0.1:443"}, nil},
		{"audit softens outside cidrs", policy.ModeAudit, "mixed.example.test", policy.ReasonPrivate, true, []string{"10.2.0.1:443", "10.1.0.1:443"}, nil},
		{"cname to a metadata name", policy.ModeEnforce, "cname-to-metadata.example.test", policy.ReasonMetadata, false, nil, resolver.ErrMetadataName},
		{"lookup failed: the decision stays", policy.ModeEnforce, "down.example.test", policy.ReasonAllowed, false, nil, resolver.ErrUpstream},
		{"no address", policy.ModeEnforce, "empty.example.test", policy.ReasonAllowed, false, nil, ErrNoAddress},
		{"IP literal, not looked up", policy.ModeEnforce, "10.1.2.3", policy.ReasonAllowed, false, []string{"10.1.2.3:443"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := newTestPipeline(t, tc.mode, true)
			d := p.Admit(Request{Client: c, Host: "x.example.test", Port: 443}).Decision
			r := p.Route(context.Background(), d, tc.host, 443)
			if r.Decision.Reason != tc.want || r.Decision.WouldDeny != tc.wouldDeny {
				t.Fatalf("Route = %+v, want %s would_deny %v", r.Decision, tc.want, tc.wouldDeny)
			}
			var got []string
			for _, ap := range r.Addrs {
				got = append(got, ap.String())
			}
			if len(got) != len(tc.addrs) || len(got) > 0 && got[0] != tc.addrs[0] || len(got) > 1 && got[1] != tc.addrs[1] {
				t.Fatalf("addrs %v, want %v", got, tc.addrs)
			}
			if !errors.Is(r.Err, tc.err) || tc.err == nil && r.Err != nil {
				t.Fatalf("err %v, want %v", r.Err, tc.err)
			}
			if literal := tc.host == "10.1.2.3"; r.Looked == literal {
				t.Fatalf("Looked %v for %s", r.Looked, tc.host)
			}
		})
	}
}

// TestRedecide: revocation's admission, with the guard on the dialled
// address.
func TestRedecide(t *testing.T) {
	p, c := newTestPipeline(t, policy.ModeEnforce, true)
	snap := p.cfg.Policy()
	for _, tc := range []struct {
		name string
		src  netip.Addr
		host string
		peer string
		want policy.Reason
	}{
		{"gone pod", netip.MustParseAddr("10.244.0.99"), "api.example.test", "10.1.0.1:443", policy.ReasonUnknownClient},
		{"still allowed", c.IP, "api.example.test", "10.1.0.1:443", policy.ReasonAllowed},
		{"peer now outside cidrs", c.IP, "api.example.test", "10.2.0.1:443", policy.ReasonPrivate},
		{"rule gone", c.IP, "evil.test", "10.1.0.1:443", policy.ReasonNotAllowlisted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Redecide(snap, tc.src, tc.host, 443, netip.MustParseAddrPort(tc.peer)); got.Reason != tc.want {
				t.Fatalf("Redecide = %s, want %s", got.Reason, tc.want)
			}
		})
	}
}

// TestConfigValidate: every missing or invalid input is named, once; New
// refuses what Validate refuses.
func TestConfigValidate(t *testing.T) {
	ok := Config{Inputs: Inputs{Policy: func() *policy.Snapshot { return nil }, Identity: staticIdentity{}}, Guard: policy.NewGuard(policy.GuardConfig{})}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"complete", func(*Config) {}, nil},
		{"audit mode", func(c *Config) { c.Mode = policy.ModeAudit }, nil},
		{"empty", func(c *Config) { *c = Config{} }, []string{"Policy is required", "Identity is required", "Guard is required"}},
		{"no guard", func(c *Config) { c.Guard = nil }, []string{"Guard is required"}},
		{"unknown mode", func(c *Config) { c.Mode = "permissive" }, []string{`Mode "permissive"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			err := cfg.Validate()
			if _, nerr := New(cfg); (nerr == nil) != (err == nil) {
				t.Fatalf("New: %v, Validate: %v", nerr, err)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Fatalf("Validate = %q: %q %d times, want once", err, w, n)
				}
			}
		})
	}
}
