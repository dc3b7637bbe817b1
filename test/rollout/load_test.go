package rollout

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/watch"
	"github.com/miekg/dns"
)

// load is the steady traffic of the workload pods through the Service:
// DNS over UDP and TCP and new CONNECT downloads, ten a second each per
// pod, and long tunnels opened at the start.
type load struct {
	svc string // the Service's ClusterIP
	tls *tls.Config

	mu     sync.Mutex
	sent   map[string]int      // "ip kind" -> requests sent
	failed map[string]int      // "ip kind" -> requests that failed
	errs   []string            // a sample of the failures
	fails  []time.Time         // when each failed request ended
	long   map[string][]string // ip -> how each long tunnel ended
	warm   map[string]int
	warmed chan struct{}
	nwarm  int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLoad(svc string, w *world) *load {
	return &load{svc: svc, tls: &tls.Config{ServerName: okHost, RootCAs: w.caPool},
		sent: map[string]int{}, failed: map[string]int{}, long: map[string][]string{}, warm: map[string]int{}, warmed: make(chan struct{})}
}

// kinds of request of the load; the record's kind for each.
var loadKinds = []struct{ name, recordKind string }{{"dns-udp", "dns"}, {"dns-tcp", "dns"}, {"connect", "connect"}}

// start runs the load from each workload pod (namespace, address) and a
// long tunnel per pod.
func (l *load) start(pods map[string]string) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.nwarm = len(pods) * len(loadKinds)
	for ns, ip := range pods {
		for _, k := range loadKinds {
			l.wg.Go(func() {
				// A request begun runs to its end after stop: egressd
				// records it, so the client counts it.
				watch.Every(ctx, 100*time.Millisecond, func() { l.note(ip, k.name, l.once(ns, k.name)) })
			})
		}
		l.wg.Go(func() { l.longTunnel(ctx, ns, ip) })
	}
}

// waitWarm waits until every pod got three answers of each kind.
func (l *load) waitWarm(t *testing.T) {
	t.Helper()
	select {
	case <-l.warmed:
	case <-time.After(30 * time.Second):
		l.stop()
		t.Fatalf("the load never got three answers of each kind from each pod: %s; %v", l.summary(), l.errs)
	}
}

// stop ends the load and waits for its requests.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *load) note(ip, kind string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := ip + " " + kind
	l.sent[key]++
	if err != nil {
		l.failed[key]++
		l.fails = append(l.fails, time.Now())
		if len(l.errs) < 20 {
			l.errs = append(l.errs, fmt.Sprintf("%s %s %s: %v", time.Now().Format("15:04:05.000"), ip, kind, err))
		}
		return
	}
	if l.warm[key]++; l.warm[key] == 3 {
		if l.nwarm--; l.nwarm == 0 {
			close(l.warmed)
		}
	}
}

// once is one request of the given kind from namespace ns.
func (l *load) once(ns, kind string) error {
	rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	switch kind {
	case "dns-udp", "dns-tcp":
		network := strings.TrimPrefix(kind, "dns-")
		c, err := dialIn(rctx, ns, network, net.JoinHostPort(l.svc, "53"))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		q := new(dns.Msg)
		q.SetQuestion(okHost+".", dns.TypeA)
		dc := &dns.Conn{Conn: c}
		if err := dc.WriteMsg(q); err != nil {
			return err
		}
		m, err := dc.ReadMsg()
		if err != nil {
			return err
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			return fmt.Errorf("answer %s with %d records", dns.RcodeToString[m.Rcode], len(m.Answer))
		}
		return nil
	default:
		tc, err := l.tunnel(rctx, ns)
		if err != nil {
			return err
		}
		defer tc.Close()
		body, err := get(tc, "/small")
		if err != nil {
			return err
		}
		b, err := io.ReadAll(body)
		if err != nil || string(b) != "ok" {
			return fmt.Errorf("GET /small: %q %v", b, err)
		}
		return nil
	}
}

// tunnel opens a CONNECT tunnel to the origin through the Service and
// does the TLS handshake through it.
func (l *load) tunnel(ctx context.Context, ns string) (*tls.Conn, error) {
	return tunnelVia(ctx, ns, net.JoinHostPort(l.svc, "3128"), l.tls)
}

// tunnelVia opens a CONNECT tunnel from namespace ns through the proxy at
// addr and does the TLS handshake through it.
func tunnelVia(ctx context.Context, ns, addr string, conf *tls.Config) (*tls.Conn, error) {
	c, err := dialIn(ctx, ns, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	target := okHost + ":443"
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(&bufConn{c, br}, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return tc, nil
}

// get sends GET path on an open TLS connection and returns the body.
func get(tc *tls.Conn, path string) (io.Reader, error) {
	if _, err := fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, okHost); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp.Body, nil
}

// longTunnel holds a slow download open until the load stops (it ends
// "finished") or egressd cuts it ("cut: ...").
func (l *load) longTunnel(ctx context.Context, ns, ip string) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	tc, err := l.tunnel(tctx, ns)
	cancel()
	end := "finished"
	if err != nil {
		end = "open failed: " + err.Error()
	} else {
		stop := context.AfterFunc(ctx, func() { tc.Close() })
		body, err := get(tc, "/slow")
		if err == nil {
			_, err = io.Copy(io.Discard, body)
		}
		if stop() { // egressd ended it, not the test
			end = fmt.Sprintf("cut: %v", err)
		}
		tc.Close()
	}
	l.mu.Lock()
	l.long[ip] = append(l.long[ip], end)
	l.mu.Unlock()
}

// totals sums sent and failed over every pod and kind.
func (l *load) totals() (sent, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.sent {
		sent += n
		failed += l.failed[k]
	}
	return sent, failed
}

// summary lists sent/failed per kind.
func (l *load) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	per := map[string][2]int{}
	for k, n := range l.sent {
		kind := k[strings.IndexByte(k, ' ')+1:]
		v := per[kind]
		v[0] += n
		v[1] += l.failed[k]
		per[kind] = v
	}
	var out []string
	for kind, v := range per {
		out = append(out, fmt.Sprintf("%s %d sent %d failed", kind, v[0], v[1]))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
