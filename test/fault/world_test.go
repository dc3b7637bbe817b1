package fault

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/dnstest"
)

const pod = "127.0.0.2"

// dnsMode is how the upstream DNS server behaves.
type dnsMode int32

const (
	dnsOK       dnsMode = iota
	dnsSilent           // reads queries, answers nothing
	dnsGarbage          // answers bytes that are not a DNS message
	dnsTruncate         // answers TC=1 without records, over UDP and TCP
)

// world is the outside: DNS for *.fault.test on 127.0.0.1 (TTL 1) and
// origins that behave or not.
type world struct {
	dnsAddr  string
	mode     atomic.Int32
	queries  atomic.Int64
	caPool   *x509.CertPool
	tlsPort  string // a TLS origin that answers GET /small
	hangPort string // accepts and never answers
	rstPort  string // accepts, reads, resets
	httpPort string // plain HTTP origin
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{}
	ca, err := certs.NewCA("fault CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("ok.fault.test", "hang.fault.test", "rst.fault.test")
	if err != nil {
		t.Fatal(err)
	}
	w.caPool = x509.NewCertPool()
	w.caPool.AppendCertsFromPEM(ca.CertPEM())
	small := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(rw, "ok") })

	tln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	hln := listen(t)
	ts, hs := &http.Server{Handler: small}, &http.Server{Handler: small}
	go func() { _ = ts.Serve(tln) }()
	go func() { _ = hs.Serve(hln) }()
	t.Cleanup(func() { ts.Close(); hs.Close() })
	w.tlsPort, w.httpPort = port(tln.Addr()), port(hln.Addr())

	// hang: accept, hold, never write.
	hang := listen(t)
	w.hangPort = port(hang.Addr())
	var held sync.Map
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			held.Store(c, true)
		}
	}()
	t.Cleanup(func() {
		held.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	// rst: accept, read what comes (a ClientHello or a request), reset.
	rst := listen(t)
	w.rstPort = port(rst.Addr())
	go func() {
		for {
			c, err := rst.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 512)
				_, _ = c.Read(buf)
				_ = c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
	}()

	pc, tcpLn := dnstest.ListenPair(t)
	w.dnsAddr = pc.LocalAddr().String()
	go w.serveUDP(pc)
	tcpSrv := &dns.Server{Listener: tcpLn, Handler: dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		if m := w.answer(q); m != nil {
			_ = rw.WriteMsg(m)
		}
	})}
	go func() { _ = tcpSrv.ActivateAndServe() }()
	t.Cleanup(func() { pc.Close(); _ = tcpSrv.Shutdown() })
	return w
}

// serveUDP answers by mode; garbage is written raw.
func (w *world) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		w.queries.Add(1)
		q := new(dns.Msg)
		if q.Unpack(buf[:n]) != nil {
			continue
		}
		if dnsMode(w.mode.Load()) == dnsGarbage {
			_, _ = pc.WriteTo([]byte("\x00\x01garbage, not a DNS message"), from)
			continue
		}
		m := w.answer(q)
		if m == nil {
			continue
		}
		out, err := m.Pack()
		if err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// answer returns the reply for q in the current mode; nil means silence.
func (w *world) answer(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	switch dnsMode(w.mode.Load()) {
	case dnsSilent:
		return nil
	case dnsTruncate:
		m.Truncated = true
		return m
	case dnsGarbage:
		m.Rcode = dns.RcodeFormatError
		m.Id = q.Id + 1 // a mismatched id: garbage over TCP too
		return m
	}
	m.Authoritative = true
	if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA && strings.HasSuffix(q.Question[0].Name, ".fault.test.") {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
			A:   net.IPv4(127, 0, 0, 1),
		})
	}
	return m
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func port(a net.Addr) string { _, p, _ := net.SplitHostPort(a.String()); return p }
