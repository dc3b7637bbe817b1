package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/egressd/egressd/record"
)

// protos are the two protocols inside an inspected tunnel, for the tests
// that run over both.
var protos = []struct {
	name  string
	h2    bool
	proto string
}{
	{"http1", false, "HTTP/1.1"},
	{"http2", true, "HTTP/2.0"},
}

// do sends one request through c and returns its response, the body read.
func do(t *testing.T, c *http.Client, method, url string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// nextKind returns the next record of kind, passing others by (an
// inspected exchange's record and its tunnel's interim records interleave).
func nextKind(t *testing.T, ie *inspectEnv, kind string) record.Record {
	t.Helper()
	for range 1000 {
		if r := ie.sink.next(t); r.Kind == kind {
			return r
		}
	}
	t.Fatalf("no record of kind %s", kind)
	return record.Record{}
}

// TestInspectedInterim: a tunnel kept open past the interim interval gets
// interim records (the real audit logger's) that carry what its end
// record carries: tls.inspected, tls.origin_cert, tls.alpn and the
// requests so far. Go's client over HTTP/1.1 and HTTP/2.
func TestInspectedInterim(t *testing.T) {
	for _, tt := range protos {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{auditInterim: 20 * time.Millisecond})
			c := ie.client(tt.h2)
			var tunnel string
			for range 2 {
				if resp := do(t, c, "GET", ie.url("inspect.test", "/small"), nil); resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				tunnel = nextKind(t, ie, record.KindInspected).Tunnel
			}
			// The tunnel stays open (keep-alive) until an interim record
			// counts both requests.
			var r record.Record
			for r.Requests < 2 {
				r = nextKind(t, ie, record.KindConnect)
				if r.Event != record.EventInterim || r.ID != tunnel {
					t.Fatalf("record event %q id %q; want an interim record of tunnel %s", r.Event, r.ID, tunnel)
				}
				if r.Requests > 0 && (r.TLS == nil || !r.TLS.Inspected || r.TLS.OriginCert == nil) {
					t.Fatalf("interim record with %d requests: tls %+v; want inspected, origin_cert", r.Requests, r.TLS)
				}
			}
			wantALPN := "http/1.1"
			if tt.h2 {
				wantALPN = "h2"
			}
			switch {
			case r.Requests != 2:
				t.Fatalf("interim requests %d; want 2", r.Requests)
			case !strings.Contains(r.TLS.OriginCert.Issuer, "egressd proxy test") || r.TLS.OriginCert.NotAfter.IsZero():
				t.Fatalf("interim origin_cert %+v; want the origin's", *r.TLS.OriginCert)
			case r.TLS.ALPN != wantALPN || r.TLS.Result != "established" || r.BytesSent == 0:
				t.Fatalf("interim tls alpn %q result %q bytes %d; want %s, established, bytes", r.TLS.ALPN, r.TLS.Result, r.BytesSent, wantALPN)
			}
			c.Transport.(*http.Transport).CloseIdleConnections()
			for {
				if r = nextKind(t, ie, record.KindConnect); r.Event != record.EventInterim {
					break
				}
			}
			if r.ID != tunnel || r.Requests != 2 || r.TLS == nil || !r.TLS.Inspected {
				t.Fatalf("end record id %q requests %d tls %+v; want %s, 2, inspected", r.ID, r.Requests, r.TLS, tunnel)
			}
		})
	}
}

// refused checks a response and the record of its exchange: egressd's
// status with X-Egressd-Reason reason, the record kind inspected with
// that status, reason and outcome; it returns the record.
func refused(t *testing.T, ie *inspectEnv, resp *http.Response, status int, reason, outcome, proto string) record.Record {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("X-Egressd-Reason") != reason {
		t.Fatalf("status %d X-Egressd-Reason %q; want %d %s", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), status, reason)
	}
	r := nextKind(t, ie, record.KindInspected)
	if r.HTTP == nil || r.HTTP.Status != status || r.HTTP.Proto != proto || r.Reason != reason && outcome == record.OutcomeRefused || r.Outcome != outcome || r.Tunnel == "" {
		t.Fatalf("record %+v http %+v; want status %d %s, reason %s, outcome %s", r, r.HTTP, status, proto, reason, outcome)
	}
	return r
}

// TestInspectedHeaderTooLarge: a request inside an inspected tunnel whose
// head (HTTP/1.1) or header list (HTTP/2) is over the proxy's
// MaxHeaderBytes is answered 431 bad-request as on the plain-HTTP path,
// and recorded. HTTP/1.1 closes the tunnel after it (as the plain path
// closes the connection); HTTP/2 refuses the stream and the tunnel carries
// the next request.
func TestInspectedHeaderTooLarge(t *testing.T) {
	for _, tt := range protos {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{maxHeaderBytes: 4 << 10})
			c := ie.client(tt.h2)
			big := http.Header{"X-Big": {strings.Repeat("b", 5<<10)}}
			resp := do(t, c, "GET", ie.url("inspect.test", "/small"), big)
			first := refused(t, ie, resp, http.StatusRequestHeaderFieldsTooLarge, "bad-request", record.OutcomeRefused, tt.proto)
			if resp := do(t, c, "GET", ie.url("inspect.test", "/small"), nil); resp.StatusCode != 200 {
				t.Fatalf("next request: status %d", resp.StatusCode)
			}
			next := nextKind(t, ie, record.KindInspected)
			if tt.h2 != (next.Tunnel == first.Tunnel) {
				t.Fatalf("tunnels %s then %s: HTTP/2 keeps the tunnel, HTTP/1.1 closes it", first.Tunnel, next.Tunnel)
			}
		})
	}
}

// TestInspectedHeaderTooLargeCurl: curl --cacert through the proxy, over
// HTTP/1.1 and HTTP/2, with one header over the limit, is answered 431
// bad-request inside the tunnel and recorded.
func TestInspectedHeaderTooLargeCurl(t *testing.T) {
	for _, tt := range []struct{ flag, proto string }{{"--http1.1", "HTTP/1.1"}, {"--http2", "HTTP/2.0"}} {
		t.Run(tt.flag, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{maxHeaderBytes: 4 << 10})
			caFile := filepath.Join(t.TempDir(), "inspect-ca.pem")
			if err := os.WriteFile(caFile, ie.ica.CertPEM(), 0o600); err != nil {
				t.Fatal(err)
			}
			out, stderr, err := curl(t, tt.flag, "--proxy", "http://"+ie.addr, "--interface", podIP, "--cacert", caFile,
				"-o", "/dev/null", "-w", "%{http_code} %header{x-egressd-reason}",
				"-H", "X-Big: "+strings.Repeat("b", 5<<10), ie.url("inspect.test", "/small"))
			if err != nil {
				t.Fatalf("curl: %v: %s", err, stderr)
			}
			code, reason, _ := strings.Cut(out, " ")
			status, err := strconv.Atoi(code)
			if err != nil {
				t.Fatalf("curl wrote %q", out)
			}
			resp := &http.Response{StatusCode: status, Header: http.Header{"X-Egressd-Reason": {reason}}}
			refused(t, ie, resp, http.StatusRequestHeaderFieldsTooLarge, "bad-request", record.OutcomeRefused, tt.proto)
		})
	}
}

// TestInspectedHeaderTimeout: an HTTP/1.1 head inside an inspected tunnel
// still incomplete at the proxy's HeaderTimeout from its first byte is
// answered 408 bad-request and recorded, as on the plain-HTTP path.
func TestInspectedHeaderTimeout(t *testing.T) {
	ie := newInspectEnv(t, envOpt{headerTimeout: 200 * time.Millisecond})
	tc := ie.tunnel(t, "inspect.test", ie.ica.CertPool())
	fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: inspect.test\r\nX-Slow: ")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	refused(t, ie, resp, http.StatusRequestTimeout, "bad-request", record.OutcomeRefused, "HTTP/1.1")
}

// TestInspectedResponseTimeout: an origin that does not answer a request
// inside an inspected tunnel within the proxy's ResponseHeaderTimeout
// (--response-timeout) gets the client a 504 upstream-error, recorded
// with outcome upstream-error; over HTTP/2 the tunnel carries the next
// request.
func TestInspectedResponseTimeout(t *testing.T) {
	for _, tt := range protos {
		t.Run(tt.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{responseHeaderTimeout: time.Second})
			c := ie.client(tt.h2)
			resp := do(t, c, "GET", ie.url("inspect.test", "/hold"), nil)
			r := refused(t, ie, resp, http.StatusGatewayTimeout, "upstream-error", record.OutcomeUpstreamError, tt.proto)
			if r.Verdict != "allow" || !strings.Contains(r.Error, "response") {
				t.Fatalf("record verdict %q error %q; want allow and the timeout", r.Verdict, r.Error)
			}
			if !tt.h2 {
				return
			}
			if resp := do(t, c, "GET", ie.url("inspect.test", "/small"), nil); resp.StatusCode != 200 {
				t.Fatalf("next request: status %d", resp.StatusCode)
			}
			if next := nextKind(t, ie, record.KindInspected); next.Tunnel != r.Tunnel {
				t.Fatalf("next request in tunnel %s; want %s", next.Tunnel, r.Tunnel)
			}
		})
	}
}

// TestInspectedResponseIdle: a response inside an inspected tunnel whose
// idle timeout is 500 ms. One that moves no byte either way for that long
// (/stall: its header and one byte, then nothing) is cut and recorded with
// outcome idle-timeout, as the plain-HTTP path's idle watch does; what the
// origin sent before it stalled reaches the client first (a response is
// relayed as it comes), and the cut shows as an error, never as a whole
// body. One that moves a byte every 50 ms for 1.2 s (/drip) is relayed
// whole: the timeout counts silence, not the tunnel's age (an HTTP/2
// tunnel used to be cut at the deadline the ClientHello peek had left on
// its connection).
func TestInspectedResponseIdle(t *testing.T) {
	for _, tt := range protos {
		for _, c := range []struct {
			path, body string
			cut        bool
			outcome    string
		}{
			{"/stall", "x", true, record.OutcomeIdleTimeout},
			{"/drip", strings.Repeat("d", 24), false, record.OutcomeOK},
		} {
			t.Run(tt.name+c.path, func(t *testing.T) {
				ie := newInspectEnv(t, envOpt{idle: 500 * time.Millisecond})
				resp, err := ie.client(tt.h2).Get(ie.url("inspect.test", c.path))
				if err != nil {
					t.Fatalf("the origin's header did not reach the client: %v", err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != c.body || (err != nil) != c.cut {
					t.Fatalf("status %d body %q error %v; want 200, %q, cut %v", resp.StatusCode, body, err, c.body, c.cut)
				}
				r := nextKind(t, ie, record.KindInspected)
				if r.HTTP == nil || r.HTTP.Status != 200 || r.Outcome != c.outcome || r.BytesReceived != int64(len(c.body)) || r.Verdict != "allow" {
					t.Fatalf("record %+v http %+v; want status 200, outcome %s, %d bytes, allow", r, r.HTTP, c.outcome, len(c.body))
				}
			})
		}
	}
}

// TestInspectedIdleTimeout: an inspected tunnel with no request for the
// proxy's IdleTimeout is closed by egressd (the engine takes the proxy's
// value) and its record written.
func TestInspectedIdleTimeout(t *testing.T) {
	ie := newInspectEnv(t, envOpt{idle: 500 * time.Millisecond})
	tc := ie.tunnel(t, "inspect.test", ie.ica.CertPool())
	br := bufio.NewReader(tc)
	fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: inspect.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("bytes after the response; want the tunnel closed when idle")
	}
	nextKind(t, ie, record.KindInspected)
	if r := nextKind(t, ie, record.KindConnect); r.Requests != 1 || r.TLS == nil || !r.TLS.Inspected {
		t.Fatalf("tunnel record requests %d tls %+v; want 1, inspected", r.Requests, r.TLS)
	}
}

// TestInspectedConcurrentStreams: an HTTP/2 tunnel advertises the proxy's
// MaxConnsPerClient as SETTINGS_MAX_CONCURRENT_STREAMS (here 2); a
// client that opens a third stream while two are open gets it reset
// (RST_STREAM, RFC 9113 §5.1.2) and a record of kind inspected, reason
// rate-limited, outcome refused. A raw framer plays the client: Go's own
// client queues instead of exceeding the limit.
func TestInspectedConcurrentStreams(t *testing.T) {
	ie := newInspectEnv(t, envOpt{maxConns: 2})
	c, resp := ie.connect(podIP, "inspect.test:"+strconv.Itoa(ie.tlsPort))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "inspect.test", RootCAs: ie.ica.CertPool(), NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("handshake: %v, ALPN %q; want h2", err, tc.ConnectionState().NegotiatedProtocol)
	}
	// A hang guard, not a synchronization.
	tc.SetDeadline(time.Now().Add(15 * time.Second))
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	authority := "inspect.test:" + strconv.Itoa(ie.tlsPort)
	for i, path := range []string{"/hold", "/hold", "/small"} {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no RST_STREAM for stream 5: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v; want the stream reset and the tunnel up", f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.StreamID != 5 {
				t.Fatalf("RST_STREAM on stream %d; want 5", f.StreamID)
			}
			r := nextKind(t, ie, record.KindInspected)
			if r.Reason != "rate-limited" || r.Verdict != "deny" || r.Outcome != record.OutcomeRefused || r.HTTP == nil || r.HTTP.Proto != "HTTP/2.0" || !strings.Contains(r.Error, "2 concurrent streams") {
				t.Fatalf("record %+v http %+v; want rate-limited, deny, refused, HTTP/2.0, the limit", r, r.HTTP)
			}
			return
		}
	}
}
