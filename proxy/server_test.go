package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPlainHTTPFraming: what net/http's server did for the forwarded
// requests, egressd's connection loop does: 100 Continue, keep-alive for
// HTTP/1.1 and for HTTP/1.0 that asks, close when asked, HEAD without a
// body, chunked responses to HTTP/1.1 clients.
func TestPlainHTTPFraming(t *testing.T) {
	e := newEnv(t, envOpt{})
	host := fmt.Sprintf("models.test:%d", e.httpPort)
	t.Run("curl with Expect: 100-continue", func(t *testing.T) {
		body := strings.Repeat("b", 100<<10)
		out, stderr, err := curl(t, "-f", "--proxy", "http://"+e.addr, "--interface", podIP,
			"-H", "Expect: 100-continue", "--data-binary", body, "http://"+host+"/echo")
		if err != nil || out != "echo POST /echo" {
			t.Fatalf("curl: %v %s %q", err, stderr, out)
		}
		seen := <-e.seen
		if len(seen.Get("X-Seen-Body")) != len(body) || seen.Get("Expect") != "" {
			t.Fatalf("origin saw %d body bytes, Expect %q", len(seen.Get("X-Seen-Body")), seen.Get("Expect"))
		}
		if r := e.sink.next(t); r.BytesSent != int64(len(body)) {
			t.Fatalf("bytes_sent %d", r.BytesSent)
		}
	})
	for _, tc := range []struct {
		name      string
		reqs      []string // sent in one write
		statuses  []int
		bodies    []string
		chunked   []bool
		closedEnd bool // the proxy closes after the last response
	}{
		{"HTTP/1.1 keep-alive, pipelined", []string{
			"GET http://" + host + "/small HTTP/1.1\r\nHost: x\r\n\r\n",
			"HEAD http://" + host + "/small HTTP/1.1\r\nHost: x\r\n\r\n",
			"GET http://" + host + "/small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		}, []int{200, 200, 200}, []string{"ok", "", "ok"}, []bool{false, false, false}, true},
		{"HTTP/1.0 keep-alive when asked", []string{
			"GET http://" + host + "/small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
			"GET http://" + host + "/small HTTP/1.0\r\n\r\n",
		}, []int{200, 200}, []string{"ok", "ok"}, []bool{false, false}, true},
		{"a large body is chunked to an HTTP/1.1 client", []string{
			"GET http://" + host + "/w.bin HTTP/1.1\r\nHost: x\r\n\r\n",
		}, []int{200}, []string{string(weights)}, []bool{true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialFrom(t, podIP, e.addr)
			io.WriteString(c, strings.Join(tc.reqs, ""))
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
			br := bufio.NewReader(c)
			for i, req := range tc.reqs {
				method, _, _ := strings.Cut(req, " ")
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != tc.statuses[i] || string(b) != tc.bodies[i] {
					t.Fatalf("response %d: %d %d bytes %v", i, resp.StatusCode, len(b), err)
				}
				if chunked := len(resp.TransferEncoding) > 0; chunked != tc.chunked[i] {
					t.Fatalf("response %d chunked %v", i, chunked)
				}
				if r := e.sink.next(t); r.HTTP == nil || r.HTTP.Method != method || r.Outcome != "ok" {
					t.Fatalf("record %d %+v", i, r)
				}
			}
			if tc.closedEnd {
				if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
					t.Fatalf("connection still open after the last response: %d %v", n, err)
				}
			}
		})
	}
}
