package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
)

// startWorld starts the outside world: DNS for *.soak.test on 127.0.0.1
// (TTL 5 s, so that lookups keep reaching the upstream), a TLS origin and
// a plain HTTP origin.
func (s *soak) startWorld() (func(), error) {
	ca, err := certs.NewCA("soak CA")
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue("ok.soak.test", "keep.soak.test", "churn.soak.test", "denied.soak.test")
	if err != nil {
		return nil, err
	}
	s.caPool = x509.NewCertPool()
	s.caPool.AppendCertsFromPEM(ca.CertPEM())
	small := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	tln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return nil, err
	}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, s.tlsPort, _ = net.SplitHostPort(tln.Addr().String())
	_, s.httpPort, _ = net.SplitHostPort(hln.Addr().String())
	ts, hs := &http.Server{Handler: small, ErrorLog: log.New(&s.originErrs, "", 0)}, &http.Server{Handler: small}
	go func() { _ = ts.Serve(tln) }()
	go func() { _ = hs.Serve(hln) }()

	// UDP and TCP on one port; the UDP port's TCP twin may be taken by
	// another socket, so another port is tried.
	var pc net.PacketConn
	var tcpLn net.Listener
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		if tcpLn, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		return nil, err
	}
	s.dnsUp = pc.LocalAddr().String()
	mux := dns.NewServeMux()
	mux.HandleFunc("soak.test.", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
		_ = w.WriteMsg(m)
	})
	udp := &dns.Server{PacketConn: pc, Handler: mux}
	tcp := &dns.Server{Listener: tcpLn, Handler: mux}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	return func() {
		_ = ts.Close()
		_ = hs.Close()
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
	}, nil
}

// writePolicies writes the policy directory for churn step i: the base
// policy always; churn.soak.test allowed on even steps only; a second
// document whose purpose text changes every step (a content change that
// decides nothing differently).
func (s *soak) writePolicies(dir string, i int) {
	base := fmt.Sprintf(`apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: soak, namespace: soak}
spec:
  podSelector: {matchLabels: {app: soak}}
  egress:
  - hosts: [ok.soak.test, keep.soak.test]
    ports: [%[1]s, %[2]s]
    cidrs: [127.0.0.0/8]
    purpose: soak step %[3]d
`, s.tlsPort, s.httpPort, i)
	churn := ""
	if i%2 == 0 {
		churn = fmt.Sprintf(`apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: churn, namespace: soak}
spec:
  podSelector: {}
  egress:
  - hosts: [churn.soak.test]
    ports: [%s]
    cidrs: [127.0.0.0/8]
`, s.tlsPort)
	}
	writeAtomic(filepath.Join(dir, "base.yaml"), base)
	writeAtomic(filepath.Join(dir, "churn.yaml"), churn+"\n")
}

// writePods writes the pods file for churn step i: five steady pods, and
// a sixth (127.0.0.7) that is absent on every third step and relabelled
// on the others.
func (s *soak) writePods(path string, i int) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for n := 2; n <= 6; n++ {
		fmt.Fprintf(&b, `- kind: Pod
  metadata: {name: soak-%[1]d, namespace: soak, uid: uid-%[1]d, labels: {app: soak}}
  spec: {serviceAccountName: soak}
  status: {phase: Running, podIPs: [{ip: 127.0.0.%[1]d}]}
`, n)
	}
	if i%3 != 2 {
		app := "soak"
		if i%3 == 1 {
			app = "other"
		}
		fmt.Fprintf(&b, `- kind: Pod
  metadata: {name: churn-%d, namespace: soak, labels: {app: %s}}
  spec: {serviceAccountName: soak}
  status: {phase: Running, podIPs: [{ip: 127.0.0.7}]}
`, i, app)
	}
	writeAtomic(path, b.String())
}

func writeAtomic(path, data string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		panic(err)
	}
}
