// Package fault is the fault suite: the real egressd binary (built once by
// TestMain) against an outside world that misbehaves — an upstream DNS
// server that stops answering, answers garbage or truncates forever, an
// origin that accepts and never answers or resets mid-handshake, and a
// SIGTERM under load. Each test asserts what users rely on: a clear
// status (502/504), exactly one record per request with its outcome, no
// goroutine left behind, and recovery when the fault ends.
//
// Everything runs on 127.0.0.0/8; clients bind to 127.0.0.2 (a pod).
package fault

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
	"github.com/miekg/dns"
)

var egressdBin string

func TestMain(m *testing.M) { os.Exit(testutil.MainWithEgressd(m, &egressdBin)) }

// TestUpstreamDNSStops: the upstream stops answering. Within the stale
// window the cached answer is served (dns.stale in the record); after it
// the request fails with 502 and outcome resolve-failed (verdict allow:
// the policy allowed it); when the upstream returns, requests work again
// once the last failure's window (--dns-failure-ttl, RFC 9520) is over.
func TestUpstreamDNSStops(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--dns-stale-for", "3s", "--dns-timeout", "300ms", "--dns-failure-ttl", failureTTL.String())
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st != 200 {
		t.Fatalf("healthy upstream: status %d", st)
	} else {
		c.Close()
	}
	w.mode.Store(int32(dnsSilent))
	time.Sleep(1100 * time.Millisecond) // the TTL (1 s) runs out: the next lookup asks upstream
	st, c := in.connect(t, "ok.fault.test", w.tlsPort)
	if st != 200 {
		t.Fatalf("within the stale window: status %d, want 200 (serve-stale)", st)
	}
	c.Close()
	in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.DNS != nil && r.DNS.Stale })

	time.Sleep(3 * time.Second) // past the stale window
	if st, _ := in.connect(t, "ok.fault.test", w.tlsPort); st != http.StatusBadGateway {
		t.Fatalf("after the stale window: status %d, want 502", st)
	}
	recs := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Outcome == "resolve-failed" })
	if r := recs[0]; r.Verdict != "allow" || r.Reason != "allowed" {
		t.Fatalf("resolve failure changed the decision: %+v", r)
	}

	w.mode.Store(int32(dnsOK))
	recovered(t, w, in)
}

// failureTTL is the fault tests' --dns-failure-ttl: a failed lookup is
// answered from the failure this long (RFC 9520) before egressd asks the
// upstream again.
const failureTTL = 200 * time.Millisecond

// recovered checks that a request through a recovered upstream DNS works
// once the last failure's window (failureTTL) has passed, and not later.
func recovered(t *testing.T, w *world, in *instance) {
	t.Helper()
	time.Sleep(failureTTL)
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st != 200 {
		t.Fatalf("after recovery: status %d", st)
	} else {
		c.Close()
	}
}

// TestUpstreamDNSGarbage: garbage and endless truncation fail the lookup
// within bounded time, with a record, and egressd keeps serving.
func TestUpstreamDNSGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode dnsMode
	}{{"garbage", dnsGarbage}, {"truncation loop", dnsTruncate}} {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t)
			in := startEgressd(t, w, "--dns-stale-for", "-1s", "--dns-timeout", "300ms", "--dns-failure-ttl", failureTTL.String())
			w.mode.Store(int32(tc.mode))
			start := time.Now()
			if st, _ := in.connect(t, "ok.fault.test", w.tlsPort); st != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", st)
			}
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("took %s", el)
			}
			in.waitRecords(t, 1, func(r record) bool { return r.Outcome == "resolve-failed" })
			// The stub resolver answers SERVFAIL for the same name, with a record.
			q := new(dns.Msg)
			q.SetQuestion("ok.fault.test.", dns.TypeA)
			cl := &dns.Client{Net: "udp", Timeout: 10 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(pod)}}}
			resp, _, err := cl.Exchange(q, in.dns)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Rcode != dns.RcodeServerFailure {
				t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
			}
			in.waitRecords(t, 1, func(r record) bool { return r.Kind == "dns" })
			w.mode.Store(int32(dnsOK))
			recovered(t, w, in)
		})
	}
}

// TestOriginFaults: an origin that accepts and never answers, and one
// that resets mid-handshake. Plain HTTP gets 504 and 502; tunnels end
// with their TLS result and outcome; nothing is left running.
func TestOriginFaults(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--response-timeout", "500ms")
	// Warm-up: a healthy tunnel and a healthy plain request first, so that
	// what egressd starts on first use and keeps (socket pools, timers)
	// is in the baseline.
	if st, c := in.connect(t, "ok.fault.test", w.tlsPort); st == 200 {
		tc := tls.Client(c, &tls.Config{ServerName: "ok.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	} else {
		t.Fatalf("warm-up CONNECT: status %d", st)
	}
	if st := in.get(t, "http://ok.fault.test:"+w.httpPort+"/small"); st != 200 {
		t.Fatalf("warm-up GET: status %d", st)
	}
	in.waitRecords(t, 2, func(r record) bool { return r.Host == "ok.fault.test" })
	base := in.gauge(t, "go_goroutines")

	t.Run("http origin never answers: 504", func(t *testing.T) {
		if st := in.get(t, "http://hang.fault.test:"+w.hangPort+"/x"); st != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", st)
		}
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "http" && r.Host == "hang.fault.test" })[0]
		if r.Verdict != "allow" || r.Reason != "allowed" || r.Outcome != "upstream-error" || r.HTTP == nil || r.HTTP.Status != 504 {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("http origin resets: 502", func(t *testing.T) {
		if st := in.get(t, "http://rst.fault.test:"+w.rstPort+"/x"); st != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", st)
		}
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "http" && r.Host == "rst.fault.test" })[0]
		if r.Verdict != "allow" || r.Outcome != "upstream-error" || r.HTTP == nil || r.HTTP.Status != 502 {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("tunnel: origin resets mid-handshake", func(t *testing.T) {
		st, c := in.connect(t, "rst.fault.test", w.rstPort)
		if st != 200 {
			t.Fatalf("CONNECT status %d", st)
		}
		tc := tls.Client(c, &tls.Config{ServerName: "rst.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake with a resetting origin succeeded")
		}
		c.Close()
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Host == "rst.fault.test" })[0]
		if r.Verdict != "allow" || r.Outcome != "upstream-error" || r.TLS == nil || r.TLS.Result != "no-server-hello" {
			t.Fatalf("record %+v", r)
		}
	})
	t.Run("tunnel: origin never answers, client gives up", func(t *testing.T) {
		st, c := in.connect(t, "hang.fault.test", w.hangPort)
		if st != 200 {
			t.Fatalf("CONNECT status %d", st)
		}
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		tc := tls.Client(c, &tls.Config{ServerName: "hang.fault.test", RootCAs: w.caPool})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake with a silent origin succeeded")
		}
		c.Close()
		r := in.waitRecords(t, 1, func(r record) bool { return r.Kind == "connect" && r.Host == "hang.fault.test" })[0]
		if r.Verdict != "allow" || r.TLS == nil || r.TLS.Result != "no-server-hello" {
			t.Fatalf("record %+v", r)
		}
	})
	in.settles(t, base+3) // a leak per faulty request (four of them) would pass it
}

// TestSIGTERMUnderLoad: SIGTERM while clients keep opening tunnels and
// requests, with --lameduck 0 (startEgressd), so that the listener closes
// at once and the drain begins under load (TestLameduck covers the
// lameduck). egressd exits 0 within the drain timeout, and every request
// that got an answer (or a tunnel) has exactly one end record; no record
// stands for a request that was never sent.
func TestSIGTERMUnderLoad(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--drain-timeout", "2s")
	var answered, sent atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
				c, err := d.Dial("tcp", in.proxy)
				if err != nil {
					return // the listener is closed: the drain began
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var req string
				if i%2 == 0 {
					target := "ok.fault.test:" + w.tlsPort
					req = "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
				} else {
					req = "GET http://ok.fault.test:" + w.httpPort + "/small HTTP/1.1\r\nHost: ok.fault.test\r\nConnection: close\r\n\r\n"
				}
				if _, err := io.WriteString(c, req); err != nil {
					c.Close()
					continue
				}
				sent.Add(1)
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					c.Close()
					continue
				}
				answered.Add(1)
				if i%2 == 0 && resp.StatusCode == 200 {
					// Hold the tunnel with a TLS request or two: the drain
					// sees open tunnels.
					tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "ok.fault.test", RootCAs: w.caPool})
					if tc.Handshake() == nil {
						_, _ = io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: ok.fault.test\r\n\r\n")
						if r2, err := http.ReadResponse(bufio.NewReader(tc), nil); err == nil {
							_, _ = io.Copy(io.Discard, r2.Body)
						}
					}
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				c.Close()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond) // load is running
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-in.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		in.exited <- nil // for Cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("egressd did not exit within 15s of SIGTERM")
	}
	cancel()
	wg.Wait()
	recs := in.records(t)
	ids := map[string]int{}
	ends := int64(0)
	for _, r := range recs {
		if r.Event == "interim" || r.Client.IP != pod {
			continue
		}
		ends++
		ids[r.ID]++
		if ids[r.ID] > 1 {
			t.Errorf("id %s has %d end records", r.ID, ids[r.ID])
		}
	}
	if ends < answered.Load() || ends > sent.Load() {
		t.Fatalf("%d end records; %d requests answered, %d sent: want answered ≤ records ≤ sent", ends, answered.Load(), sent.Load())
	}
	t.Logf("%d requests sent, %d answered, %d end records", sent.Load(), answered.Load(), ends)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
