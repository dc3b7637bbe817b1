package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
)

// TestUDPReaders: the reader loop of udp.go, the path of every UDP query.
func TestUDPReaders(t *testing.T) {
	f := newFixture(t, nil)
	var serving []chan error

	t.Run("concurrent queries from several sources", func(t *testing.T) {
		before := len(f.audit.records(t))
		sources := []struct {
			src   string
			rcode int
		}{
			{"127.0.0.2", dns.RcodeSuccess},   // a pod the policy allows models.test
			{"127.0.0.3", dns.RcodeNameError}, // a pod without policy
			{"127.0.0.9", dns.RcodeRefused},   // no pod
		}
		const perSource = 40
		var wg sync.WaitGroup
		errs := make(chan error, len(sources)*perSource)
		for _, s := range sources {
			for i := range perSource {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := new(dns.Msg)
					m.SetQuestion("models.test.", dns.TypeA)
					if i%2 == 0 {
						m.SetEdns0(1232, false)
					}
					c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(s.src)}}}
					resp, _, err := c.Exchange(m, f.addr)
					switch {
					case err != nil:
						errs <- fmt.Errorf("%s: %w", s.src, err)
					case resp.Id != m.Id || resp.Rcode != s.rcode:
						errs <- fmt.Errorf("%s: id %d rcode %s, want id %d rcode %s", s.src, resp.Id, dns.RcodeToString[resp.Rcode], m.Id, dns.RcodeToString[s.rcode])
					case s.rcode == dns.RcodeSuccess && (len(resp.Answer) != 1 || answerAddrs(resp)[0] != "203.0.113.10"):
						errs <- fmt.Errorf("%s: answer %v", s.src, resp.Answer)
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		f.audit.waitFor(t, before+len(sources)*perSource)
		if got := len(f.audit.records(t)) - before; got != len(sources)*perSource {
			t.Errorf("%d audit records, want one per query (%d)", got, len(sources)*perSource)
		}
	})

	t.Run("truncated answer", func(t *testing.T) {
		for _, bufsize := range []uint16{0, 1232} {
			m := new(dns.Msg)
			m.SetQuestion("big.blob.test.", dns.TypeA)
			limit := dns.MinMsgSize
			if bufsize > 0 {
				m.SetEdns0(bufsize, false)
				limit = int(bufsize)
			}
			wire, _ := m.Pack()
			reply := rawUDP(t, "127.0.0.2", f.addr, wire)
			resp := new(dns.Msg)
			if err := resp.Unpack(reply); err != nil {
				t.Fatal(err)
			}
			if !resp.Truncated || len(reply) > limit || resp.Rcode != dns.RcodeSuccess {
				t.Fatalf("EDNS0 %d: TC %v, %d bytes, rcode %s: want TC and at most %d bytes", bufsize, resp.Truncated, len(reply), dns.RcodeToString[resp.Rcode], limit)
			}
		}
		if resp := f.ask(t, "127.0.0.2", "tcp", "big.blob.test", dns.TypeA, 1232); resp.Truncated || len(resp.Answer) != 100 {
			t.Fatalf("over TCP: TC %v, %d answers", resp.Truncated, len(resp.Answer))
		}
	})

	t.Run("cached answers flow while every reader's query waits upstream", func(t *testing.T) {
		f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232) // cached
		n := udpReaders() + 2
		release, arrived := f.up.Gate(2 * n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := new(dns.Msg)
				m.SetQuestion(fmt.Sprintf("wait%d.blob.test.", i), dns.TypeA)
				c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}}}
				if _, _, err := c.Exchange(m, f.addr); err != nil {
					t.Errorf("miss %d: %v", i, err)
				}
			}()
		}
		for range n {
			<-arrived // every miss is waiting upstream
		}
		resp := f.ask(t, "127.0.0.2", "udp", "models.test", dns.TypeA, 1232)
		release()
		wg.Wait()
		if len(resp.Answer) != 1 {
			t.Fatalf("cached answer %v", resp)
		}
	})

	t.Run("malformed, short and answer datagrams", func(t *testing.T) {
		good := new(dns.Msg)
		good.SetQuestion("models.test.", dns.TypeA)
		good.Id = 7
		goodWire, _ := good.Pack()
		answer := good.Copy()
		answer.Response = true
		answer.Id = 8
		answerWire, _ := answer.Pack()
		garbage := append([]byte{0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 0xC0, 0xFF) // a pointer out of the message
		for _, tc := range []struct {
			name   string
			wire   []byte
			formID uint16 // 0: no reply expected before the good query's
		}{
			{"unparsable: FORMERR, header only", garbage, 9},
			{"shorter than a header: nothing", []byte{1, 2, 3}, 0},
			{"an answer (QR): nothing", answerWire, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(f.addr)))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang guard only
				if _, err := c.Write(tc.wire); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 65535)
				if tc.formID != 0 {
					n, err := c.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					m := new(dns.Msg)
					if err := m.Unpack(buf[:n]); err != nil {
						t.Fatal(err)
					}
					if m.Id != tc.formID || m.Rcode != dns.RcodeFormatError || n > len(tc.wire) || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 {
						t.Fatalf("reply %d bytes %v", n, m)
					}
				}
				// The next reply on this socket must be the good query's:
				// nothing was sent for a datagram that gets no answer.
				if _, err := c.Write(goodWire); err != nil {
					t.Fatal(err)
				}
				n, err := c.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				m := new(dns.Msg)
				if err := m.Unpack(buf[:n]); err != nil || m.Id != good.Id || len(m.Answer) != 1 {
					t.Fatalf("reply %v (%v), want the answer to id %d", m, err, good.Id)
				}
			})
		}
	})

	t.Run("a PacketConn that is not a UDP socket", func(t *testing.T) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- f.srv.ServeUDP(onlyPacketConn{pc}) }()
		serving = append(serving, done)
		resp := askAt(t, "127.0.0.2", pc.LocalAddr().String(), "models.test")
		if len(resp.Answer) != 1 {
			t.Fatalf("answer %v", resp)
		}
	})
	shutdownAll(t, f, serving)
}

// shutdownAll shuts the fixture's server down and checks that the extra
// ServeUDP calls of a test ended (the fixture's cleanup checks its own).
func shutdownAll(t *testing.T, f *fixture, serving []chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, done := range serving {
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("ServeUDP: %v, want ErrServerClosed", err)
		}
	}
}

// onlyPacketConn hides the *net.UDPConn: the one-datagram-at-a-time path.
type onlyPacketConn struct{ net.PacketConn }

func askAt(t *testing.T, src, addr, name string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s from %s to %s: %v", name, src, addr, err)
	}
	return resp
}

// TestUDPWildcardReplySource: bound to every address, the answer leaves
// from the address the query was sent to (the client's connected socket
// drops anything else), as miekg's server did with the destination's
// control message.
func TestUDPWildcardReplySource(t *testing.T) {
	f := newFixture(t, nil)
	var serving []chan error
	defer func() { shutdownAll(t, f, serving) }()
	for _, tc := range []struct {
		listen string
		to     []string
	}{
		{"0.0.0.0:0", []string{"127.0.0.1", "127.0.0.3"}},
		{"[::]:0", []string{"127.0.0.1", "127.0.0.3", "::1"}},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", tc.listen)
			if err != nil {
				t.Skipf("no %s socket here: %v", tc.listen, err)
			}
			port := pc.LocalAddr().(*net.UDPAddr).Port
			done := make(chan error, 1)
			go func() { done <- f.srv.ServeUDP(pc) }()
			serving = append(serving, done)
			for _, to := range tc.to {
				src := "127.0.0.2"
				if to == "::1" {
					if probe, err := net.ListenPacket("udp", "[::1]:0"); err != nil {
						t.Logf("no ::1 here: %v", err)
						continue
					} else {
						probe.Close()
					}
					src = "::1" // identity: unknown, so REFUSED is the answer
				}
				for range 3 { // the reply's control message is kept per reader
					resp := askAt(t, src, net.JoinHostPort(to, fmt.Sprint(port)), "models.test")
					if src == "127.0.0.2" && len(resp.Answer) != 1 || src == "::1" && resp.Rcode != dns.RcodeRefused {
						t.Fatalf("to %s: %v", to, resp)
					}
				}
			}
		})
	}
}

// TestUDPShutdown: Shutdown ends every reader, parked ones included, and
// closes the socket.
func TestUDPShutdown(t *testing.T) {
	f := newFixture(t, nil)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeUDP(pc) }()
	addr := pc.LocalAddr().String()
	askAt(t, "127.0.0.2", addr, "models.test")                                   // a cache miss: its reader detaches and parks
	askAt(t, "127.0.0.2", addr, "other.blob.test")                               // another
	if got := askAt(t, "127.0.0.2", addr, "models.test"); len(got.Answer) != 1 { // a hit
		t.Fatalf("answer %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeUDP: %v, want ErrServerClosed", err)
	}
	if _, _, err := pc.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("socket still open: %v", err)
	}
	if err := f.srv.ServeUDP(pc); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("ServeUDP after Shutdown: %v", err)
	}
}

// TestUDPWorkerAfterStop: a query that detaches after the server stopped
// (shutdown or a read error) hands its worker to a new goroutine that
// still answers, or at least records, the rest of the batch: no datagram
// read is left without a record.
func TestUDPWorkerAfterStop(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name  string
		waits bool // the stop waits for running workers
		stop  func(u *udpServer) error
	}{
		{"shutdown", true, func(u *udpServer) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return u.shutdown(ctx)
		}},
		{"read error", false, func(u *udpServer) error { u.fail(errors.New("test read error")); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			u := newUDPServer(f.srv, pc)
			// One worker still answering its batch (this goroutine,
			// counted as running), so a shutdown waits for it.
			u.wg.Add(1)
			stopped := make(chan error, 1)
			go func() { stopped <- tc.stop(u) }()
			if tc.waits {
				for !u.closing.Load() {
					runtime.Gosched() // shutdown is on its way
				}
			} else {
				stopped <- <-stopped // stopped: the socket is closed
			}

			// The busy goroutine's query detaches after the stop, with one
			// datagram of its worker's batch still to answer.
			host := strings.ReplaceAll(tc.name, " ", "-") + ".after-stop.evil.test"
			m := new(dns.Msg)
			m.SetQuestion(host+".", dns.TypeA)
			wire, _ := m.Pack()
			w := u.newWorker()
			w.nin = 1
			w.in[0].N = copy(w.in[0].Buffers[0], wire)
			w.in[0].Addr = &net.UDPAddr{IP: net.ParseIP("127.0.0.2"), Port: 53}
			u.run(w)
			u.wg.Done()

			u.wg.Wait()
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			if rec := f.audit.last(t, host); rec.Kind != "dns" {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestUDPMalformed: a datagram that does not parse is answered FORMERR,
// never larger than itself (the source may be spoofed: questions that
// parsed may have been compressed in the query), and recorded: reason
// bad-request, no host, the client as identified.
func TestUDPMalformed(t *testing.T) {
	f := newFixture(t, nil)
	// A long first question, then questions that point back at its name
	// (2 bytes each, the whole name once unpacked), then one whose pointer
	// leads out of the message.
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".test."
	const pointers = 8
	amp := []byte{0, 11, 1, 0, 0, pointers + 2, 0, 0, 0, 0, 0, 0}
	name := make([]byte, 255)
	n, err := dns.PackDomainName(long, name, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	amp = append(amp, name[:n]...)
	amp = append(amp, 0, 1, 0, 1)
	for range pointers {
		amp = append(amp, 0xC0, 12, 0, 1, 0, 1)
	}
	amp = append(amp, 0xC0, 0xFF)
	tests := []struct {
		name   string
		src    string
		wire   []byte
		id     uint16
		client string // the pod recorded; "" for none
	}{
		{"pod", "127.0.0.2", []byte{0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF}, 9, "llm-0"},
		{"unknown source", "127.0.0.9", []byte{0, 10, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0xFF}, 10, ""},
		{"compressed questions", "127.0.0.9", amp, 11, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.audit.records(t))
			reply := rawUDP(t, tc.src, f.addr, tc.wire)
			m := new(dns.Msg)
			if err := m.Unpack(reply); err != nil {
				t.Fatal(err)
			}
			if m.Id != tc.id || m.Rcode != dns.RcodeFormatError || len(reply) > len(tc.wire) {
				t.Fatalf("reply of %d bytes to %d: %v", len(reply), len(tc.wire), m)
			}
			rs := f.audit.records(t)[before:]
			if len(rs) != 1 {
				t.Fatalf("%d audit records, want 1", len(rs))
			}
			r := rs[0]
			if r.Kind != "dns" || r.Reason != string(policy.ReasonBadRequest) || r.Verdict != "deny" || r.Host != "" ||
				r.Client.IP != tc.src || r.Client.Pod != tc.client || r.DNS == nil || r.DNS.Rcode != "FORMERR" {
				t.Fatalf("record %+v", r)
			}
		})
	}
}
