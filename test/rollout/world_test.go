package rollout

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
)

const (
	worldIP = "10.250.200.1"
	// okHost resolves to worldIP; its origin answers GET /small with "ok"
	// and streams GET /slow a byte every 100ms until the client leaves.
	okHost = "ok.world.test"
)

// world is the outside: DNS for *.world.test and the TLS origin, in
// namespace egrro-world.
type world struct {
	caPool *x509.CertPool
	caPEM  []byte
}

func startWorld(t *testing.T) *world {
	t.Helper()
	ns := addPodNS(t, "world", worldIP, "")
	ca, err := certs.NewCA("rollout CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(okHost)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{caPool: ca.CertPool(), caPEM: ca.CertPEM()}

	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok") })
	mux.HandleFunc("/slow", func(rw http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(rw, "."); err != nil {
				return
			}
			rw.(http.Flusher).Flush()
		}
	})
	tln := tls.NewListener(listenIn(t, ns, "tcp", worldIP+":443"), &tls.Config{Certificates: []tls.Certificate{cert}})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(tln) }()
	t.Cleanup(func() { srv.Close() })

	answer := dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA && strings.HasSuffix(q.Question[0].Name, ".world.test.") {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A:   net.ParseIP(worldIP),
			})
		}
		_ = rw.WriteMsg(m)
	})
	pc := listenPacketIn(t, ns, worldIP+":53")
	ln := listenIn(t, ns, "tcp", worldIP+":53")
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: answer}, {Listener: ln, Handler: answer}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() { _ = s.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return w
}
