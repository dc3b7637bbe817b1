package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// connLimit counts the connections each source IP holds open, for
// Config.MaxConnsPerClient. Without it one pod (or one unknown source: the
// identity check comes after accept) could open connections until the
// proxy runs out of descriptors and memory, which denies every other pod.
type connLimit struct {
	max int // <= 0: no limit

	mu   sync.Mutex
	open map[netip.Addr]int
}

func newConnLimit(max int) *connLimit {
	return &connLimit{max: max, open: map[netip.Addr]int{}}
}

// acquire takes a slot for src; it returns the release func (safe to call
// more than once) or nil when src is at its limit.
func (l *connLimit) acquire(src netip.Addr) func() {
	if l.max <= 0 {
		return func() {}
	}
	l.mu.Lock()
	if l.open[src] >= l.max {
		l.mu.Unlock()
		return nil
	}
	l.open[src]++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.open[src]--; l.open[src] <= 0 {
				delete(l.open, src)
			}
			l.mu.Unlock()
		})
	}
}

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
