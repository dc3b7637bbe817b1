package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// FuzzReadHead holds the head reader to net/http's request parser: where
// both accept a head they agree on method, target, Host and the body's
// framing (the smuggling question); the reader never accepts a head with
// both framings; a refusal's recorded host is bounded.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
		"GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, he := ReadHead(bufio.NewReaderSize(bytes.NewReader(b), 64), 4096, "")
		if he != nil {
			if he.Status != 0 && he.Status < 400 {
				t.Fatalf("refused with status %d", he.Status)
			}
			return
		}
		if h.Chunked && h.ContentLength >= 0 {
			t.Fatal("both framings accepted")
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return // net/http refuses what the reader takes: only stricter matters
		}
		if req.Method != h.Method || req.RequestURI != h.Target {
			t.Fatalf("net/http %q %q, reader %q %q", req.Method, req.RequestURI, h.Method, h.Target)
		}
		if chunked := len(req.TransferEncoding) > 0; chunked != h.Chunked {
			t.Fatalf("net/http chunked %v, reader %v", chunked, h.Chunked)
		}
		if !h.Chunked && req.ContentLength != max(h.ContentLength, 0) {
			t.Fatalf("net/http Content-Length %d, reader %d", req.ContentLength, h.ContentLength)
		}
		if req.Close != h.Close {
			t.Fatalf("net/http close %v, reader %v", req.Close, h.Close)
		}
		if h.Method != http.MethodConnect && !strings.Contains(h.Target, "://") && req.Host != h.Host {
			t.Fatalf("net/http Host %q, reader %q", req.Host, h.Host)
		}
	})
}

// FuzzCheckHead: CheckHead (the rules inside inspected tunnels) accepts
// exactly the heads ReadHead accepts, and a head it accepts is one
// net/http's reader (which inspect parses it with afterwards) reads with
// at most one Host, never both Content-Length and Transfer-Encoding, and
// the same framing and host.
func FuzzCheckHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, head string) {
		if !strings.HasSuffix(head, "\r\n\r\n") {
			head += "\r\n\r\n"
		}
		if i := strings.Index(head, "\r\n\r\n"); i+4 != len(head) {
			head = head[:i+4] // one head, as inspect's peek cuts it
		}
		host, err := CheckHead([]byte(head))
		h, he := ReadHead(bufio.NewReaderSize(strings.NewReader(head), 64), 1<<20, "")
		if (err == nil) != (he == nil) && !strings.HasPrefix(head, "\r\n") {
			// ReadHead skips empty lines before a request line; inspect's
			// peek never hands CheckHead such a head.
			t.Fatalf("CheckHead %v, ReadHead %v: %q", err, he, head)
		}
		if err != nil {
			return
		}
		req, rerr := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if rerr != nil {
			return // net/http refuses what the rules pass: only stricter matters
		}
		if n := len(req.Header.Values("Host")); n > 1 {
			t.Fatalf("checked head with %d Host fields: %q", n, head)
		}
		if len(req.TransferEncoding) > 0 && req.Header.Get("Content-Length") != "" {
			t.Fatalf("checked head with Content-Length and Transfer-Encoding: %q", head)
		}
		if h == nil {
			return
		}
		if string(host) != h.Host {
			t.Fatalf("CheckHead Host %q, ReadHead %q: %q", host, h.Host, head)
		}
		if chunked := len(req.TransferEncoding) > 0; chunked != h.Chunked || !h.Chunked && req.ContentLength != max(h.ContentLength, 0) {
			t.Fatalf("net/http framing chunked %v length %d, rules %v %d: %q", chunked, req.ContentLength, h.Chunked, h.ContentLength, head)
		}
		if h.Method != http.MethodConnect && !strings.Contains(h.Target, "://") && req.Host != h.Host {
			t.Fatalf("net/http Host %q, rules %q: %q", req.Host, h.Host, head)
		}
	})
}
