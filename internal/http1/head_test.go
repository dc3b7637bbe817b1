package http1

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

func TestReadHead(t *testing.T) {
	type want struct {
		status             int // 0: accepted
		method, target     string
		host               string
		cl                 int64
		chunked, close, ex bool
		probe              string
	}
	for _, tc := range []struct {
		name string
		in   string
		want want
	}{
		{"CONNECT", "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", want{method: "CONNECT", target: "a.test:443", host: "a.test:443", cl: -1}},
		{"CONNECT without Host", "CONNECT a.test:443 HTTP/1.1\r\n\r\n", want{method: "CONNECT", target: "a.test:443", cl: -1}},
		{"GET absolute-form", "GET http://a.test/x?q=1 HTTP/1.1\r\nHost: a.test\r\n\r\n", want{method: "GET", target: "http://a.test/x?q=1", host: "a.test", cl: -1}},
		{"leading empty lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", want{method: "GET", target: "/", host: "a", cl: -1}},
		{"Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", want{method: "POST", target: "/", host: "a", cl: 12}},
		{"repeated equal Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n", want{method: "POST", target: "/", host: "a", cl: 3}},
		{"chunked, any case", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", want{method: "POST", target: "/", host: "a", cl: -1, chunked: true}},
		{"Connection close", "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", want{method: "GET", target: "/", host: "a", cl: -1, close: true}},
		{"HTTP/1.0 closes", "GET / HTTP/1.0\r\n\r\n", want{method: "GET", target: "/", cl: -1, close: true}},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", want{method: "GET", target: "/", cl: -1}},
		{"Expect 100-continue", "PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", want{method: "PUT", target: "/", host: "a", cl: 1, ex: true}},
		{"probe", "CONNECT a:1 HTTP/1.1\r\nEgressd-Probe: neg 1\r\n\r\n", want{method: "CONNECT", target: "a:1", cl: -1, probe: "neg 1"}},
		{"UTF-8 in the target", "CONNECT \uff4d.test:443 HTTP/1.1\r\n\r\n", want{method: "CONNECT", target: "\uff4d.test:443", cl: -1}},
		{"OWS around a value", "GET / HTTP/1.1\r\nHost: \t a \t\r\n\r\n", want{method: "GET", target: "/", host: "a", cl: -1}},

		{"garbage", "GARBAGE\r\n\r\n", want{status: 400}},
		{"empty method", " / HTTP/1.1\r\nHost: a\r\n\r\n", want{status: 400}},
		{"two spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", want{status: 400}},
		{"trailing space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", want{status: 400}},
		{"tab in the target", "GET /\tx HTTP/1.1\r\nHost: a\r\n\r\n", want{status: 400}},
		{"lower-case version", "GET / http/1.1\r\nHost: a\r\n\r\n", want{status: 400}},
		{"HTTP/2.0", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", want{status: 505}},
		{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", want{status: 505}},
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n", want{status: 400}},
		{"bare CR", "GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", want{status: 400}},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", want{status: 400}},
		{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", want{status: 400}},
		{"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", want{status: 400}},
		{"NUL in a value", "GET / HTTP/1.1\r\nHost: a\r\nX: \x00\r\n\r\n", want{status: 400}},
		{"VT in a value", "GET / HTTP/1.1\r\nHost: a\r\nX:\vy\r\n\r\n", want{status: 400}},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", want{status: 400}},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", want{status: 400}},
		{"Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", want{status: 400}},
		{"Host in UTF-8", "GET / HTTP/1.1\r\nHost: m\u043edels.test\r\n\r\n", want{status: 400}},
		{"Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", want{status: 400}},
		{"Content-Length signed", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n", want{status: 400}},
		{"Content-Length conflict", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", want{status: 400}},
		{"Content-Length overflow", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", want{status: 400}},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", want{status: 400}},
		{"TE twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", want{status: 501}},
		{"TE list", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", want{status: 501}},
		{"TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", want{status: 400}},
		{"Expect other", "POST / HTTP/1.1\r\nHost: a\r\nExpect: x\r\n\r\n", want{status: 417}},
		{"too large", "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", 600) + "\r\n\r\n", want{status: 431}},
		{"incomplete", "GET / HTTP/1.1\r\nHost: a\r\n", want{status: 0, method: "incomplete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, he := ReadHead(bufio.NewReaderSize(strings.NewReader(tc.in), 16), 512, "Egressd-Probe")
			if tc.want.method == "incomplete" {
				if he == nil || he.Status != 0 || he.N == 0 {
					t.Fatalf("head %+v error %v", h, he)
				}
				return
			}
			if tc.want.status != 0 {
				if he == nil || he.Status != tc.want.status {
					t.Fatalf("head %+v error %v, want status %d", h, he, tc.want.status)
				}
				return
			}
			if he != nil {
				t.Fatalf("refused: %v (status %d)", he, he.Status)
			}
			got := want{method: h.Method, target: h.Target, host: h.Host, cl: h.ContentLength, chunked: h.Chunked, close: h.Close, ex: h.Expect, probe: h.Captured}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			if h.Method == http.MethodConnect && h.Header != nil {
				t.Fatal("a CONNECT built a header map")
			}
		})
	}
}

func TestConnectTarget(t *testing.T) {
	for _, tc := range []struct {
		target   string
		host     string
		port     int
		absolute bool
		ok       bool
	}{
		{"a.test:443", "a.test", 443, false, true},
		{"[::1]:443", "::1", 443, false, true},
		{"[fe80::1%25eth0]:443", "fe80::1%eth0", 443, false, true},
		{"a.test@b.test:443", "b.test", 443, false, true},
		{"a.test:00443", "a.test", 443, false, true},
		{"http://169.254.169.254:443/", "169.254.169.254", 443, true, true},
		{"https://user:pw@a.test:8443/x?y", "a.test", 8443, true, true},
		{"a.test", "a.test", 0, false, false},
		{"a.test:https", "a.test", 0, false, false},
		{"a.test:65536", "a.test", 0, false, false},
		{"a%2Etest:443", "", 0, false, false},
		{"/rpc", "", 0, false, false},
	} {
		t.Run(tc.target, func(t *testing.T) {
			host, port, absolute, err := ConnectTarget(tc.target)
			if (err == nil) != tc.ok || absolute != tc.absolute || tc.ok && (host != tc.host || port != tc.port) {
				t.Fatalf("ConnectTarget = %q %d %v %v", host, port, absolute, err)
			}
		})
	}
}

// BenchmarkReadHead compares the head reader with net/http's request
// parser on the heads the proxy listener reads most: a CONNECT (curl's)
// and an absolute-form GET. STYLE.md: hand-written only with the
// benchmark that justifies it (its strictness and the record of refused
// heads are the other reasons: TestStdlibServerAnswersBadHeadsWithoutHandler).
func BenchmarkReadHead(b *testing.B) {
	heads := []struct{ name, head string }{
		{"connect", "CONNECT models.example.com:443 HTTP/1.1\r\nHost: models.example.com:443\r\nUser-Agent: curl/8.5.0\r\nProxy-Connection: Keep-Alive\r\n\r\n"},
		{"get", "GET http://models.example.com/w.bin HTTP/1.1\r\nHost: models.example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nProxy-Connection: Keep-Alive\r\n\r\n"},
	}
	for _, h := range heads {
		r := strings.NewReader(h.head)
		br := bufio.NewReaderSize(r, 4096)
		b.Run(h.name+"/stdlib", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(h.head)
				br.Reset(r)
				if _, err := http.ReadRequest(br); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(h.name+"/own", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(h.head)
				br.Reset(r)
				if _, he := ReadHead(br, 32<<10, "Egressd-Probe"); he != nil {
					b.Fatal(he)
				}
			}
		})
	}
}
