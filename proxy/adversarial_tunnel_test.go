package proxy

// Adversarial tests of the tunnels, the SNI listener and the limits (see
// adversarial_test.go).

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/proxy/internal/sniff"
	"github.com/egressd/egressd/record"
)

// helloWithSNI returns a real ClientHello (Go's, no SNI) with a
// server_name extension of raw bytes added.
func helloWithSNI(t *testing.T, ext []byte) []byte {
	t.Helper()
	return withExtension(captureClientHello(t, "", []string{"http/1.1"}), sniff.ExtServerName, ext)
}

// TestAdversarialTunnelHello: what the pod sends first in an admitted
// CONNECT tunnel to models.test. Relayed: the origin answered (bytes came
// back); refused: the tunnel closed without a byte from the origin.
func TestAdversarialTunnelHello(t *testing.T) {
	e := newEnv(t, envOpt{})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	evil := captureClientHello(t, "evil.test", nil)
	two := binary.BigEndian.AppendUint16(nil, uint16(2*3+len("models.test")+len("evil.test")))
	for _, n := range []string{"models.test", "evil.test"} {
		two = append(two, 0)
		two = binary.BigEndian.AppendUint16(two, uint16(len(n)))
		two = append(two, n...)
	}
	padded := withExtension(captureClientHello(t, "models.test", nil), 21, make([]byte, 40<<10)) // RFC 7685 padding
	ech := withExtension(captureClientHello(t, "models.test", nil), 0xfe0d, bytes.Repeat([]byte{0xec}, 200))
	for _, tc := range []struct {
		name    string
		send    []byte
		chunk   int // write in pieces of this size; 0: one write
		relayed bool
		reason  string
		result  string // tls.result in the record; "" not checked
		allow   bool   // verdict allow although nothing came back
	}{
		{"SNI differs only by case", helloWithSNI(t, sniExt("Models.TEST")), 0, true, "allowed", "", false},
		{"SNI with a trailing dot", helloWithSNI(t, sniExt("models.test.")), 0, true, "allowed", "", false},
		{"SNI is another host", evil, 0, false, "sni-mismatch", "", false},
		{"SNI is an IP literal", helloWithSNI(t, sniExt("127.0.0.1")), 0, false, "sni-mismatch", "", false},
		{"SNI with an embedded NUL", helloWithSNI(t, sniExt("models.test\x00.evil.test")), 0, false, "sni-mismatch", "", false},
		{"two host_name entries", helloWithSNI(t, two), 0, false, "bad-request", "", false},
		{"two server_name extensions", withExtension(captureClientHello(t, "models.test", nil), sniff.ExtServerName, sniExt("evil.test")), 0, false, "bad-request", "", false},
		{"mismatching hello in 7-byte records, 1-byte segments", fragment(evil, 7), 1, false, "sni-mismatch", "", false},
		{"matching hello in 7-byte records, 3-byte segments", fragment(captureClientHello(t, "models.test", nil), 7), 3, true, "allowed", "", false},
		{"hello larger than the peek bound", fragment(padded, 1<<14), 0, false, "bad-request", "", false},
		{"alert record before a mismatching hello", append([]byte{21, 3, 3, 0, 2, 1, 90}, evil...), 0, false, "bad-request", "", false},
		{"ChangeCipherSpec before a mismatching hello", append([]byte{20, 3, 3, 0, 1, 1}, evil...), 0, false, "bad-request", "", false},
		// ECH (draft-ietf-tls-esni): egressd sees the outer SNI only, the
		// name of the client-facing server it decided; the inner name,
		// encrypted to that server, may be any of its tenants. Refused
		// unless a rule says ech: allow (TestECH has the real handshake).
		{"ECH-like extension with the right outer SNI", ech, 0, false, "ech", "", false},
		// Not TLS: relayed to the decided address as not-tls (SSH, plain
		// HTTP through CONNECT). A TLS hello after other bytes is no
		// handshake a TLS server accepts.
		{"non-TLS bytes first, then a mismatching hello", append([]byte("\x00\x00\r\n"), evil...), 0, false, "allowed", "not-tls", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			go func() {
				if tc.chunk == 0 {
					c.Write(tc.send)
					return
				}
				for b := tc.send; len(b) > 0; b = b[min(tc.chunk, len(b)):] {
					if _, err := c.Write(b[:min(tc.chunk, len(b))]); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			n, _ := c.Read(make([]byte, 1))
			c.Close()
			r := e.sink.next(t)
			if got := n > 0; got != tc.relayed {
				t.Fatalf("relayed %v, want %v", got, tc.relayed)
			}
			if r.Reason != tc.reason || (r.Verdict == "allow") != (tc.relayed || tc.allow) {
				t.Fatalf("record verdict %q reason %q error %q, want reason %q", r.Verdict, r.Reason, r.Error, tc.reason)
			}
			if tc.result != "" && (r.TLS == nil || r.TLS.Result != tc.result) {
				t.Fatalf("record tls %+v, want result %q", r.TLS, tc.result)
			}
		})
	}
	for _, v := range []struct {
		name    string
		version uint16
		want    string
	}{{"TLS 1.2 client", tls.VersionTLS12, "TLS1.2"}, {"TLS 1.3 client", tls.VersionTLS13, "TLS1.3"}} {
		t.Run(v.name, func(t *testing.T) {
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			tc := tls.Client(c, &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool(), MaxVersion: v.version})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			tc.Close()
			r := e.sink.next(t)
			if r.TLS == nil || r.TLS.Version != v.want || r.TLS.Result != "established" || r.Reason != "allowed" {
				t.Fatalf("record tls %+v reason %q", r.TLS, r.Reason)
			}
		})
	}
}

// TestAdversarialSNIListener: the transparent TLS listener, where the SNI
// is all there is.
func TestAdversarialSNIListener(t *testing.T) {
	e := newEnv(t, envOpt{peekTimeout: 300 * time.Millisecond})
	ln := listen(t, "127.0.0.1:0")
	go e.p.ServeSNI(ln, e.tlsPort)
	hello := captureClientHello(t, "models.test", nil)
	for _, tc := range []struct {
		name    string
		src     string
		send    []byte
		relayed bool
		reason  string
	}{
		{"nothing sent: cut at the peek timeout", podIP, nil, false, "no-sni"},
		{"half a hello, then silence: cut at the peek timeout", podIP, hello[:len(hello)/2], false, "no-sni"},
		{"hello larger than the peek bound", podIP, fragment(withExtension(hello, 21, make([]byte, 40<<10)), 1<<14), false, "no-sni"},
		{"two host_name entries", podIP, helloWithSNI(t, append(binary.BigEndian.AppendUint16(nil, 26), append(append([]byte{0, 0, 11}, "models.test"...), append([]byte{0, 0, 9}, "evil.test"...)...)...)), false, "no-sni"},
		{"alert record, then a hello", podIP, append([]byte{21, 3, 3, 0, 2, 1, 90}, hello...), false, "no-sni"},
		{"SNI names the metadata host", podIP, helloWithSNI(t, sniExt("metadata.google.internal")), false, "metadata"},
		{"SNI is the metadata address", podIP, helloWithSNI(t, sniExt("169.254.169.254")), false, "metadata"},
		{"SNI is not a valid name", podIP, helloWithSNI(t, sniExt("models.test/evil")), false, "invalid-host"},
		{"SNI with upper case and a trailing dot", podIP, helloWithSNI(t, sniExt("MODELS.test.")), true, "allowed"},
		{"unknown client: nothing is read", nobody, hello, false, "unknown-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.dials.Load()
			c := dialFrom(t, tc.src, ln.Addr().String())
			if tc.send != nil {
				go c.Write(tc.send)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			n, _ := c.Read(make([]byte, 1))
			c.Close()
			r := e.sink.next(t)
			if got := n > 0; got != tc.relayed {
				t.Fatalf("relayed %v, want %v", got, tc.relayed)
			}
			if r.Kind != record.KindSNI || r.Reason != tc.reason {
				t.Fatalf("record kind %q reason %q error %q, want %q", r.Kind, r.Reason, r.Error, tc.reason)
			}
			if !tc.relayed && e.dials.Load() != before {
				t.Fatal("a refused connection dialled")
			}
		})
	}
}

// TestAdversarialExhaustion: slow or many connections from one pod are
// bounded and do not starve other pods.
func TestAdversarialExhaustion(t *testing.T) {
	t.Run("slowloris: a trickled header is cut by the header timeout", func(t *testing.T) {
		e := newEnv(t, envOpt{headerTimeout: 200 * time.Millisecond})
		c := dialFrom(t, podIP, e.addr)
		io.WriteString(c, "GET http://models.test/ HTTP/1.1\r\nHost: models.test\r\nX-A: 1\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the proxy kept a trickling client open")
		}
		if e.dials.Load() != 0 {
			t.Fatal("dialled")
		}
	})

	t.Run("connections per client are bounded, other clients are served", func(t *testing.T) {
		e := newEnv(t, envOpt{maxConns: 3})
		ln := listen(t, "127.0.0.1:0")
		go e.p.ServeSNI(ln, e.tlsPort)
		target := fmt.Sprintf("models.test:%d", e.tlsPort)
		var open []net.Conn
		for range 3 {
			c, resp := e.connect(podIP, target) // tunnels, idle: each holds a slot
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			open = append(open, c)
		}
		// Refused connections are counted, not recorded one by one: a
		// summary per client, kind and second (Flush stands for the
		// second passing).
		const extra = 5
		for _, tc := range []struct {
			name string
			run  func() error
		}{
			{"more proxy connections get 429", func() error {
				for range extra {
					c := dialFrom(t, podIP, e.addr)
					fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
					resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
					if err != nil {
						return err
					}
					if resp.StatusCode != 429 || resp.Header.Get("X-Egressd-Reason") != "rate-limited" {
						return fmt.Errorf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
					}
				}
				return nil
			}},
			{"more SNI connections are closed unread", func() error {
				for range extra {
					c := dialFrom(t, podIP, ln.Addr().String())
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if n, _ := c.Read(make([]byte, 1)); n != 0 {
						return fmt.Errorf("read %d bytes", n)
					}
				}
				return nil
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if err := tc.run(); err != nil {
					t.Fatal(err)
				}
			})
		}
		t.Run("one summary record per kind", func(t *testing.T) {
			e.p.overLimit.Flush()
			kinds := map[string]record.Record{}
			for range 2 {
				r := e.sink.next(t)
				kinds[r.Kind] = r
			}
			for _, kind := range []string{record.KindHTTP, record.KindSNI} {
				r := kinds[kind]
				if r.Verdict != "deny" || r.Reason != "rate-limited" || r.Outcome != record.OutcomeRefused || r.Count != extra || r.Client.Pod != "llm-0" {
					t.Fatalf("%s summary %+v", kind, r)
				}
			}
			if kinds[record.KindHTTP].HTTP == nil || kinds[record.KindHTTP].HTTP.Status != 429 {
				t.Fatalf("http summary %+v", kinds[record.KindHTTP].HTTP)
			}
		})
		t.Run("another client is still served", func(t *testing.T) {
			c, resp := e.connect(otherIP, target)
			c.Close()
			if resp.StatusCode != 403 || resp.Header.Get("X-Egressd-Reason") != "not-allowlisted" {
				t.Fatalf("status %d reason %q", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
			}
			e.sink.next(t)
		})
		t.Run("a closed tunnel frees its slot", func(t *testing.T) {
			open[0].Close()
			if r := e.sink.next(t); r.Verdict != "allow" {
				t.Fatalf("record %+v", r)
			}
			c, resp := e.connect(podIP, target)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d after a slot was freed", resp.StatusCode)
			}
			c.Close()
			e.sink.next(t)
		})
		for _, c := range open[1:] {
			c.Close()
			e.sink.next(t)
		}
		t.Run("every slot is back", func(t *testing.T) {
			if n := e.p.limit.Open(netip.MustParseAddr(podIP)); n != 0 {
				t.Fatalf("slots still held: %d", n)
			}
		})
	})

	t.Run("limit defaults", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			set  int
			want int
		}{{"zero means 1024", 0, 1024}, {"negative means no limit", -1, -1}, {"explicit", 7, 7}} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := Config{MaxConnsPerClient: tc.set}.withDefaults()
				if cfg.MaxConnsPerClient != tc.want {
					t.Fatalf("got %d", cfg.MaxConnsPerClient)
				}
				l := limit.NewConns(cfg.MaxConnsPerClient)
				src := netip.MustParseAddr(podIP)
				for i := range 1100 {
					if l.Acquire(src) == nil {
						if tc.want < 0 || i != tc.want {
							t.Fatalf("refused at %d", i)
						}
						return
					}
				}
				if tc.want >= 0 {
					t.Fatal("never refused")
				}
			})
		}
	})
}
