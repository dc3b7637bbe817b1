package resolver

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/internal/dnstest"
)

// TestOwnerFiltering: an upstream (or the attacker's authoritative server
// behind it) adds records owned by names nobody asked for. Only the query
// name and its CNAME chain survive, in chain order, for Query (what the DNS
// server hands out and caches) and LookupIP (what the proxy dials).
func TestOwnerFiltering(t *testing.T) {
	up := dnstest.NewUpstream(t)
	up.Set("owned.blob.test./A",
		"owned.blob.test. 60 IN A 203.0.113.40",
		"victim.example. 60 IN A 198.51.100.66",
		"OWNED.blob.test. 60 IN A 203.0.113.41")
	up.Set("chain.blob.test./A",
		"edge2.example.net. 60 IN A 203.0.113.21", // before its CNAME: reordered
		"intruder.example. 60 IN A 198.51.100.67",
		"chain.blob.test. 60 IN CNAME edge2.example.net.",
		"intruder.example. 60 IN CNAME edge2.example.net.")
	up.Set("twocname.blob.test./A",
		"twocname.blob.test. 60 IN CNAME edge.example.net.",
		"twocname.blob.test. 60 IN CNAME other.example.",
		"edge.example.net. 60 IN A 203.0.113.20",
		"other.example. 60 IN A 198.51.100.68")
	up.Set("foreign-only.blob.test./A", "victim.example. 60 IN A 198.51.100.66")
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: dnstest.NewClock().Now})
	tests := []struct {
		name  string
		host  string
		query []string // the answer's records, owner and data
		addrs []string // LookupIP
		err   error
	}{
		{"extra A of another owner", "owned.blob.test",
			[]string{"owned.blob.test. A 203.0.113.40", "OWNED.blob.test. A 203.0.113.41"},
			[]string{"203.0.113.40", "203.0.113.41"}, nil},
		{"chain kept in order, intruders dropped", "chain.blob.test",
			[]string{"chain.blob.test. CNAME edge2.example.net.", "edge2.example.net. A 203.0.113.21"},
			[]string{"203.0.113.21"}, nil},
		{"second CNAME of one owner ignored", "twocname.blob.test",
			[]string{"twocname.blob.test. CNAME edge.example.net.", "edge.example.net. A 203.0.113.20"},
			[]string{"203.0.113.20"}, nil},
		{"only foreign records: no data", "foreign-only.blob.test", nil, nil, ErrNoAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Query(context.Background(), tc.host, dns.TypeA)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rr := range res.Msg.Answer {
				got = append(got, rrText(rr))
			}
			if !slices.Equal(got, tc.query) {
				t.Errorf("Query answer %q, want %q", got, tc.query)
			}
			ans, err := r.LookupIP(context.Background(), tc.host)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("LookupIP err %v, want %v", err, tc.err)
			}
			var addrs []string
			for _, a := range ans.Addrs {
				addrs = append(addrs, a.String())
			}
			if !slices.Equal(addrs, tc.addrs) {
				t.Errorf("LookupIP addrs %v, want %v", addrs, tc.addrs)
			}
		})
	}
	t.Run("foreign owner never cached", func(t *testing.T) {
		before := up.Total.Load()
		if _, err := r.Query(context.Background(), "victim.example", dns.TypeA); err != nil {
			t.Fatal(err)
		}
		if up.Total.Load() == before {
			t.Fatal("victim.example answered from the cache: a foreign record was cached")
		}
	})
}

// rrText is a record as "owner TYPE data", without TTL and class.
func rrText(rr dns.RR) string {
	h := rr.Header()
	return h.Name + " " + dns.TypeToString[h.Rrtype] + " " + strings.TrimPrefix(rr.String(), h.String())
}

// TestMetadataCNAME: a CNAME whose target is a cloud metadata name ends the
// chain: the target is never asked upstream, nothing owned by it is kept,
// and LookupIP fails with ErrMetadataName (the proxy denies: metadata).
func TestMetadataCNAME(t *testing.T) {
	up := dnstest.NewUpstream(t)
	up.Set("cname-meta.blob.test./A",
		"cname-meta.blob.test. 60 IN CNAME metadata.google.internal.",
		"metadata.google.internal. 60 IN A 169.254.169.254")
	up.Set("half-meta.blob.test./A", "half-meta.blob.test. 60 IN CNAME Metadata.Google.Internal.")
	up.Set("half-meta.blob.test./AAAA", "half-meta.blob.test. 60 IN CNAME metadata.google.internal.")
	up.Set("deep-meta.blob.test./A",
		"deep-meta.blob.test. 60 IN CNAME a.example.net.",
		"a.example.net. 60 IN CNAME instance-data.ec2.internal.")
	up.Set("deep-meta.blob.test./AAAA", "deep-meta.blob.test. 60 IN AAAA 2001:db8::77")
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: dnstest.NewClock().Now})
	for _, tc := range []struct {
		name, host string
		answer     []string
		cnames     []string
	}{
		{"chain with the metadata address", "cname-meta.blob.test",
			[]string{"cname-meta.blob.test. CNAME metadata.google.internal."}, []string{"metadata.google.internal"}},
		{"chain stops at the metadata name", "half-meta.blob.test",
			[]string{"half-meta.blob.test. CNAME Metadata.Google.Internal."}, []string{"metadata.google.internal"}},
		{"two links, and the other family has an address", "deep-meta.blob.test",
			[]string{"deep-meta.blob.test. CNAME a.example.net.", "a.example.net. CNAME instance-data.ec2.internal."},
			[]string{"a.example.net", "instance-data.ec2.internal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.Query(context.Background(), tc.host, dns.TypeA)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rr := range res.Msg.Answer {
				got = append(got, rrText(rr))
			}
			if !slices.Equal(got, tc.answer) {
				t.Errorf("Query answer %q, want %q", got, tc.answer)
			}
			ans, err := r.LookupIP(context.Background(), tc.host)
			if !errors.Is(err, ErrMetadataName) || len(ans.Addrs) != 0 {
				t.Fatalf("LookupIP %v %v, want ErrMetadataName and no address", ans.Addrs, err)
			}
			if !slices.Equal(ans.CNAMEs, tc.cnames) {
				t.Errorf("cnames %v, want %v", ans.CNAMEs, tc.cnames)
			}
		})
	}
	for _, qtype := range []string{"A", "AAAA"} {
		for _, name := range []string{"metadata.google.internal.", "instance-data.ec2.internal."} {
			if n := up.Count(name, qtype, "udp") + up.Count(name, qtype, "tcp"); n != 0 {
				t.Errorf("%s %s asked upstream %d times", name, qtype, n)
			}
		}
	}
}

// TestStripECH: the ech SvcParam (key 5) of HTTPS and SVCB answers never
// leaves the resolver, so clients do not try ECH; the rest of the record
// stays.
func TestStripECH(t *testing.T) {
	up := dnstest.NewUpstream(t)
	const ech = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJw=="
	up.Set("ech.blob.test./HTTPS", `ech.blob.test. 60 IN HTTPS 1 . alpn="h2,h3" ech="`+ech+`" ipv4hint="203.0.113.9"`)
	up.Set("ech.blob.test./SVCB", `ech.blob.test. 60 IN SVCB 1 svc.blob.test. ech="`+ech+`" port=8443`)
	up.Set("only-ech.blob.test./HTTPS", `only-ech.blob.test. 60 IN HTTPS 1 . ech="`+ech+`"`)
	r := newTestResolver(t, Config{Upstreams: []string{up.Addr}, Now: dnstest.NewClock().Now})
	for _, tc := range []struct {
		name, host string
		qtype      uint16
		want       string // the SvcParams left
	}{
		{"https", "ech.blob.test", dns.TypeHTTPS, `alpn="h2,h3" ipv4hint="203.0.113.9"`},
		{"svcb", "ech.blob.test", dns.TypeSVCB, `port="8443"`},
		{"ech alone", "only-ech.blob.test", dns.TypeHTTPS, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // the miss, then the cache
				res, err := r.Query(context.Background(), tc.host, tc.qtype)
				if err != nil || len(res.Msg.Answer) != 1 {
					t.Fatalf("answer %v %v", res, err)
				}
				var params []string
				switch v := res.Msg.Answer[0].(type) {
				case *dns.HTTPS:
					for _, kv := range v.Value {
						params = append(params, kv.Key().String()+`="`+kv.String()+`"`)
					}
				case *dns.SVCB:
					for _, kv := range v.Value {
						params = append(params, kv.Key().String()+`="`+kv.String()+`"`)
					}
				}
				if got := strings.Join(params, " "); got != tc.want {
					t.Fatalf("SvcParams %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestClientSocketReuse: sequential misses share a pooled socket (one
// source port), and a late answer with another ID on that socket is
// skipped, not taken for the answer.
func TestClientSocketReuse(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	ports := map[string]bool{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			ports[from.String()] = true
			mu.Unlock()
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			// First a stale answer to another ID, then the real one.
			stale := new(dns.Msg)
			stale.SetReply(q)
			stale.Id = q.Id + 1
			stale.Answer = []dns.RR{dnstest.MustRR(q.Question[0].Name + " 60 IN A 198.51.100.99")}
			b, _ := stale.Pack()
			pc.WriteTo(b, from)
			m := new(dns.Msg)
			m.SetReply(q)
			m.Answer = []dns.RR{dnstest.MustRR(q.Question[0].Name + " 0 IN A 203.0.113.1")}
			b, _ = m.Pack()
			pc.WriteTo(b, from)
		}
	}()
	r := newTestResolver(t, Config{Upstreams: []string{pc.LocalAddr().String()}})
	for i := range 20 {
		res, err := r.Query(context.Background(), "n"+string(rune('a'+i))+".blob.test", dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		if got := answerAddrs(res.Msg); !slices.Equal(got, []string{"203.0.113.1"}) {
			t.Fatalf("query %d: answer %v: the stale answer was taken", i, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ports) != 1 {
		t.Errorf("20 sequential misses used %d source ports, want 1 (pooled)", len(ports))
	}
}
