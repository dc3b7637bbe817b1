package inspect

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawExchange sends raw bytes inside a fresh inspected HTTP/1.1 tunnel and
// returns the n responses read (fewer when the tunnel ends first) and
// whether the tunnel then ended (only read for when closed asks: a tunnel
// kept up waits for the next request). The deadline only bounds a
// failing test.
func rawExchange(t *testing.T, h *harness, raw string, n int, closed bool) ([]*http.Response, bool) {
	t.Helper()
	tc, err := rawTunnel(t, h, testHost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(20 * time.Second))
	defer tc.Close()
	br := bufio.NewReader(tc)
	var out []*http.Response
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out, true
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp)
	}
	if !closed {
		return out, false
	}
	_, err = br.ReadByte()
	return out, err == io.EOF
}

// TestHeadAttacks: request heads an attacker sends inside an inspected
// HTTP/1.1 tunnel to reach another host, another path or a pipe past the
// per-request decisions. Each is answered as want says, and what is
// pipelined behind a refusal is decided on its own or never read.
func TestHeadAttacks(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	host := testHost + ":" + port
	get := func(target, hostField string, extra ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + hostField + "\r\n" + strings.Join(extra, "") + "\r\n"
	}
	tests := []struct {
		name   string
		raw    string
		status []int    // the responses, in order
		reason []string // their X-Egressd-Reason
	}{
		{"absolute-form names another host", get("https://other.host.example/v1/models", host), []int{403}, []string{"host-mismatch"}},
		{"absolute-form of the tunnel host, denied path", "POST https://" + host + "/v1/files HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 0\r\n\r\n", []int{403}, []string{"path-not-allowed"}},
		{"absolute-form of the tunnel host, Host another", get("https://"+host+"/v1/models", "other.host.example"), []int{403}, []string{"host-mismatch"}},
		{"absolute-form with userinfo", get("https://user@other.host.example/v1/models", host), []int{403}, []string{"host-mismatch"}},
		{"Host percent-encoded", get("/v1/models", "api%2Ellm.example:"+port), []int{403}, []string{"host-mismatch"}},
		{"Host with userinfo", get("/v1/models", "x@"+host), []int{400}, []string{"bad-request"}},
		{"Host IP literal", get("/v1/models", "127.0.0.1:"+port), []int{403}, []string{"host-mismatch"}},
		{"Host IDNA lookalike", get("/v1/models", "api.llm.exampl\u0435:"+port), []int{400}, []string{"bad-request"}},
		{"Host punycode of another name", get("/v1/models", "xn--api-llm-exampl-9kb:"+port), []int{403}, []string{"host-mismatch"}},
		{"Host another port", get("/v1/models", testHost+":8443"), []int{403}, []string{"host-mismatch"}},
		{"HTTP/1.0 without Host", "GET /v1/models HTTP/1.0\r\n\r\n", []int{403}, []string{"host-mismatch"}},
		{"authority-form target", get(host, host), []int{403}, []string{"bad-request"}},
		{"asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: " + host + "\r\n\r\n", []int{403}, []string{"bad-request"}},
		{"network-path target", get("//other.host.example/v1/models", host), []int{403}, []string{"bad-request"}},
		{"encoded dot segments", get("/v1/models/%2e%2e/files", host), []int{403}, []string{"bad-request"}},
		{"dot segment with a parameter", get("/v1/models/..;/files", host), []int{403}, []string{"bad-request"}},
		{"encoded dot segment with a parameter", get("/v1/models/%2E%2E%3B/files", host), []int{403}, []string{"bad-request"}},
		{"CONNECT to the tunnel host", "CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n", []int{501}, []string{"bad-request"}},
		{"CONNECT with a path", "CONNECT /status/200 HTTP/1.1\r\nHost: " + host + "\r\n\r\n", []int{501}, []string{"bad-request"}},
		{"websocket upgrade", get("/status/101", host, "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), []int{501}, []string{"bad-request"}},
		{"h2c upgrade", get("/v1/models", host, "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"), []int{501}, []string{"bad-request"}},
		{"Connection: upgrade alone is hop-by-hop", get("/v1/models", host, "Connection: upgrade\r\n"), []int{200}, []string{""}},
		{"pipelined behind a refused one", get("/v1/files", host) + get("/v1/models", host), []int{403, 200}, []string{"path-not-allowed", ""}},
		{"pipelined behind a host-mismatch", get("/v1/models", "other.host.example") + get("/v1/models", host), []int{403, 200}, []string{"host-mismatch", ""}},
		{"pipelined behind a malformed one", get("/v1/models", host, " folded\r\n") + get("/v1/models", host), []int{400}, []string{"bad-request"}},
		{"origin switches protocols unasked", get("/status/101", host), []int{502}, []string{"upstream-error"}},
		{"reader error quotes the query", get("/v1/models/%zz?key=query-secret", host, "Authorization: Bearer sk-client-secret-token\r\n"), []int{400}, []string{"bad-request"}},
		{"pipelined behind an upgrade", get("/v1/models", host, "Upgrade: websocket\r\n") + get("/v1/models", host), []int{501}, []string{"bad-request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A refusal that closes the tunnel is the last answer;
			// what was pipelined behind it is never read.
			last := tt.status[len(tt.status)-1]
			closes := last == 400 || last == 501 || last == 502
			got, ended := rawExchange(t, h, tt.raw, len(tt.status), closes)
			if len(got) != len(tt.status) {
				t.Fatalf("%d responses; want %d", len(got), len(tt.status))
			}
			if closes && !ended {
				t.Errorf("the tunnel carried on after %d", last)
			}
			for i, resp := range got {
				if resp.StatusCode != tt.status[i] || resp.Header.Get("X-Egressd-Reason") != tt.reason[i] {
					t.Errorf("response %d: %d %q; want %d %q", i, resp.StatusCode, resp.Header.Get("X-Egressd-Reason"), tt.status[i], tt.reason[i])
				}
			}
		})
	}
	h.wait()
	// Every refusal egressd answered is recorded as one: an upgrade is
	// not an allowed request that failed upstream.
	for _, x := range h.exchanges {
		if (x.Status == 400 || x.Status == 501) && (x.Verdict.Allow || x.Verdict.Reason != "bad-request") {
			t.Errorf("exchange %s %d recorded as %+v; want refused bad-request", x.Method, x.Status, x.Verdict)
		}
	}
	assertNoSecrets(t, h)
}

// h2Exchange opens an inspected HTTP/2 tunnel, sends one HEADERS frame of
// fields (END_STREAM) and returns the response's :status and
// X-Egressd-Reason.
func h2Exchange(t *testing.T, h *harness, fields ...string) (status, reason string) {
	t.Helper()
	c, err := net.Dial("tcp", h.proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // bounds a failing test only
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	io.WriteString(c, "CONNECT "+testHost+":"+port+" HTTP/1.1\r\nHost: "+testHost+":"+port+"\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: testHost, RootCAs: h.inspCA.pool(), NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("handshake: %v %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			return "RST " + f.ErrCode.String(), ""
		case *http2.HeadersFrame:
			hf, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range hf {
				switch x.Name {
				case ":status":
					status = x.Value
				case "x-egressd-reason":
					reason = x.Value
				}
			}
			return status, reason
		}
	}
}

// TestH2Attacks: HTTP/2 streams that name another host beside the
// tunnel's or leave HTTP (CONNECT, extended CONNECT) are refused.
func TestH2Attacks(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	_, port, _ := net.SplitHostPort(h.origin.Listener.Addr().String())
	auth := testHost + ":" + port
	tests := []struct {
		name           string
		fields         []string
		status, reason string
	}{
		{"allowed", []string{":method", "GET", ":scheme", "https", ":authority", auth, ":path", "/v1/models"}, "200", ""},
		// RFC 9113 §8.3.1: x/net resets a stream whose Host names
		// another entity than its :authority before any handler runs.
		{":authority and Host disagree", []string{":method", "GET", ":scheme", "https", ":authority", auth, ":path", "/v1/models", "host", "other.host.example"}, "RST PROTOCOL_ERROR", ""},
		{"Host alone names another host", []string{":method", "GET", ":scheme", "https", ":path", "/v1/models", "host", "other.host.example"}, "403", "host-mismatch"},
		{":authority another host, Host the tunnel's", []string{":method", "GET", ":scheme", "https", ":authority", "other.host.example", ":path", "/v1/models", "host", auth}, "RST PROTOCOL_ERROR", ""},
		{":authority another host", []string{":method", "GET", ":scheme", "https", ":authority", "other.host.example", ":path", "/v1/models"}, "403", "host-mismatch"},
		{":authority another port", []string{":method", "GET", ":scheme", "https", ":authority", testHost + ":8443", ":path", "/v1/models"}, "403", "host-mismatch"},
		{"CONNECT", []string{":method", "CONNECT", ":authority", auth}, "501", "bad-request"},
		{"dot segment with a parameter", []string{":method", "GET", ":scheme", "https", ":authority", auth, ":path", "/v1/models/..;/files"}, "403", "bad-request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason := h2Exchange(t, h, tt.fields...)
			if status != tt.status || reason != tt.reason {
				t.Fatalf("%s %q; want %s %q", status, reason, tt.status, tt.reason)
			}
		})
	}
}

// TestReaderErrorQuotesNothing: what net/http's readers say of a head
// they refuse quotes its bytes; readerError keeps none of them.
func TestReaderErrorQuotesNothing(t *testing.T) {
	tests := []struct {
		name, head string
		response   bool
		want       error
	}{
		{"request-target with a query", "GET /a%zz?key=query-secret HTTP/1.1\r\nHost: a\r\n\r\n", false, errRequestUnread},
		{"absolute-form with userinfo", "GET https://user:query-secret@a/%zz HTTP/1.1\r\nHost: a\r\n\r\n", false, errRequestUnread},
		{"request header line", "GET / HTTP/1.1\r\nHost: a\r\nAuthorization Bearer sk-client-secret-token\r\n\r\n", false, errRequestUnread},
		{"response header line", "HTTP/1.1 200 OK\r\nSet-Cookie session=origin-set-cookie-secret\r\n\r\n", true, errResponseUnread},
		{"response status line", "HTTP/1.1 2x0 origin-set-cookie-secret\r\n\r\n", true, errResponseUnread},
		{"response cut short", "HTTP/1.1 200 OK\r\nSet-Cookie: origin-set-cookie-secret", true, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tt.head))
			var err error
			if tt.response {
				_, err = readResponse(br, &http.Request{Method: "GET"})
			} else {
				_, err = http.ReadRequest(br)
			}
			if err == nil {
				t.Fatal("the reader took the head")
			}
			got := readerError(err, errRequestUnread)
			if tt.response {
				got = readerError(err, errResponseUnread)
			}
			if !errors.Is(got, tt.want) {
				t.Errorf("readerError(%v) = %v; want %v", err, got, tt.want)
			}
			for _, s := range []string{"secret", "key="} {
				if strings.Contains(got.Error(), s) {
					t.Errorf("readerError(%v) = %q holds %q", err, got, s)
				}
			}
		})
	}
}
