package dnsserver

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// summaries returns the summary records (count set) of src for reason.
func summaries(t *testing.T, a *auditSink, src, reason string) []record.Record {
	t.Helper()
	var out []record.Record
	for _, r := range a.records(t) {
		if r.Count > 0 && r.Client.IP == src && r.Reason == reason {
			out = append(out, r)
		}
	}
	return out
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(ents)
}

// TestTCPConnectionCap: one pod opens 2,000 DNS-over-TCP connections (the
// attack held 8,000 open, 8,000 descriptors and +82 MiB). The server keeps
// MaxConnsPerClient of them, closes the rest at accept, and writes their
// count in summary records, not one record each; another pod is served
// meanwhile.
func TestTCPConnectionCap(t *testing.T) {
	const capConns, attempts = 64, 2000
	f := newFixture(t, func(s *Config, _ *resolver.Config) { s.MaxConnsPerClient = capConns })
	f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232) // warm
	fdsBefore, goBefore := openFDs(t), runtime.NumGoroutine()
	start := time.Now()
	q := new(dns.Msg)
	q.SetQuestion("models.test.", dns.TypeA)
	conns := make([]*dns.Conn, 0, attempts)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	answered, closed := 0, 0
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	for range attempts {
		nc, err := d.Dial("tcp", f.addr)
		if err != nil {
			t.Fatalf("dial: %v (after %d)", err, len(conns))
		}
		c := &dns.Conn{Conn: nc}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := c.WriteMsg(q); err == nil {
			if resp, err := c.ReadMsg(); err == nil && resp.Rcode == dns.RcodeSuccess {
				answered++
				continue
			}
		}
		closed++ // the server closed it at accept
	}
	if answered != capConns || closed != attempts-capConns {
		t.Fatalf("answered on %d connections, %d closed; want %d and %d", answered, closed, capConns, attempts-capConns)
	}
	if open := f.srv.conns.Open(mustAddr("127.0.0.2")); open != capConns {
		t.Errorf("server holds %d connections of the client, want %d", open, capConns)
	}
	// Descriptors and goroutines: the client's 2,000 sockets are in this
	// process too; the server's side must stay at the cap.
	if grew := openFDs(t) - fdsBefore; grew > attempts+capConns+16 {
		t.Errorf("descriptors grew by %d, want at most %d (client) + %d (server)", grew, attempts, capConns)
	}
	if grew := runtime.NumGoroutine() - goBefore; grew > capConns+16 {
		t.Errorf("goroutines grew by %d for %d held connections", grew, capConns)
	}
	t.Run("another pod is served", func(t *testing.T) {
		if resp := f.ask(t, "127.0.0.4", "tcp", "models.test", dns.TypeA, 1232); resp.Rcode != dns.RcodeSuccess {
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
	})
	f.stop() // flushes the summaries
	recs := summaries(t, f.audit, "127.0.0.2", "rate-limited")
	var total int64
	for _, r := range recs {
		total += r.Count
		if r.Kind != "dns" || r.Verdict != "deny" || r.Outcome != "refused" || r.Client.Pod != "llm-0" {
			t.Errorf("summary %+v", r)
		}
	}
	if total != attempts-capConns {
		t.Errorf("summaries count %d refusals, want %d", total, attempts-capConns)
	}
	if secs := int(time.Since(start)/time.Second) + 1; len(recs) > secs {
		t.Errorf("%d summary records in %d s: want at most one a second", len(recs), secs)
	}
}

// TestQueryRateLimit: a flood from one pod is answered REFUSED past its
// burst, never larger than the query, reaches no upstream, and is written
// as summary records (reason rate-limited, count), one a second at most;
// another pod is not affected. The limiter's clock is frozen, so that no
// token comes back during the test.
func TestQueryRateLimit(t *testing.T) {
	const burst, flood = 100, 400
	clk := time.Now()
	f := newFixture(t, func(s *Config, _ *resolver.Config) {
		s.QueryRate, s.QueryBurst = 10, burst
		s.Now = func() time.Time { return clk }
	})
	start := time.Now()
	upBefore := f.up.Total.Load()
	answered, refused := 0, 0
	for i := range flood {
		network := "udp"
		if i%10 == 0 {
			network = "tcp" // one budget for both
		}
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("f%d.blob.test.", i), dns.TypeA)
		m.SetEdns0(1232, false)
		resp := f.exchangeOnly(t, "127.0.0.2", network, m)
		switch resp.Rcode {
		case dns.RcodeRefused:
			refused++
			if network == "udp" && resp.Len() > m.Len() {
				t.Fatalf("REFUSED of %d bytes to a query of %d: amplification", resp.Len(), m.Len())
			}
		case dns.RcodeSuccess:
			answered++
		default:
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
		if i == flood/2 {
			if resp := f.ask(t, "127.0.0.4", "udp", "models.test", dns.TypeA, 1232); resp.Rcode != dns.RcodeSuccess {
				t.Fatalf("another pod during the flood: %s", dns.RcodeToString[resp.Rcode])
			}
		}
	}
	if answered != burst || refused != flood-burst {
		t.Fatalf("%d answered, %d refused; want %d and %d", answered, refused, burst, flood-burst)
	}
	if asked := f.up.Total.Load() - upBefore; asked != burst+1 {
		t.Errorf("upstream asked %d times, want %d (the burst and the other pod)", asked, burst+1)
	}
	f.stop()
	var perQuery int
	for _, r := range f.audit.records(t) {
		if r.Client.IP == "127.0.0.2" && r.Count == 0 {
			perQuery++
		}
	}
	if perQuery != burst {
		t.Errorf("%d records of single queries, want %d (refused ones are summarized)", perQuery, burst)
	}
	recs := summaries(t, f.audit, "127.0.0.2", "rate-limited")
	var total int64
	for _, r := range recs {
		total += r.Count
		if r.Kind != "dns" || r.Verdict != "deny" || r.Outcome != "refused" || r.Client.Pod != "llm-0" || r.Start.IsZero() {
			t.Errorf("summary %+v", r)
		}
	}
	if total != flood-burst {
		t.Errorf("summaries count %d, want %d", total, flood-burst)
	}
	if secs := int(time.Since(start)/time.Second) + 1; len(recs) == 0 || len(recs) > secs {
		t.Errorf("%d summary records in %d s: want one a second", len(recs), secs)
	}
	if len(summaries(t, f.audit, "127.0.0.4", "rate-limited")) != 0 {
		t.Error("the other pod was rate-limited")
	}
}
