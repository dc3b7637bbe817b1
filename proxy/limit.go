package proxy

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// tooManyConns is the answer to an HTTP client over its limit (RFC 6585
// §4); the connection is closed after it.
var tooManyConns = func() []byte {
	body := "egressd: denied: " + string(policy.ReasonTooManyConns) + "\n"
	return []byte("HTTP/1.1 429 Too Many Requests\r\n" +
		"X-Egressd-Reason: " + string(policy.ReasonTooManyConns) + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// refuseOverLimit answers (when http) and closes a connection over its
// client's limit, and records it. It runs in its own goroutine so that a
// client that does not read cannot stall the accept loop.
func (p *Proxy) refuseOverLimit(c net.Conn, kind string, answer bool) {
	go func() {
		defer c.Close()
		if answer {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(tooManyConns)
		}
		ex := p.newExchange(kind, c.RemoteAddr())
		if cl, ok := p.cfg.Identity.Lookup(ex.src); ok {
			ex.client = cl
			ex.rec.Client = audit.ClientOf(ex.src, cl)
		}
		ex.dec = policy.Denied(policy.ReasonTooManyConns)
		if answer {
			ex.rec.HTTP = &audit.HTTP{Status: http.StatusTooManyRequests}
		}
		ex.rec.Error = "over " + strconv.Itoa(p.cfg.MaxConnsPerClient) + " connections from this client"
		ex.finish(nil)
	}()
}
