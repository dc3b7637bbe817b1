// Command upstream is the benchmark's authoritative DNS server: every name
// under bench.test has one A record (TTL 1h, or -ttl), everything else is
// NXDOMAIN.
// egressd, dnsmasq and CoreDNS all forward to it, so they are compared on
// the same answers.
package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/miekg/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5390", "listen address (UDP and TCP)")
	ttl := flag.Uint("ttl", 3600, "TTL of the A records; 0 makes every query a cache miss")
	flag.Parse()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { answer(w, r, uint32(*ttl)) })
	errc := make(chan error, 2)
	for _, netw := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: *addr, Net: netw, Handler: h}
		go func() { errc <- srv.ListenAndServe() }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errc:
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	case <-sig:
	}
}

func answer(w dns.ResponseWriter, r *dns.Msg, ttl uint32) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	switch {
	case !strings.HasSuffix(name, ".bench.test."):
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		h := fnv.New32a()
		h.Write([]byte(name))
		v := h.Sum32()
		m.Answer = []dns.RR{&dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   net.IPv4(203, 0, byte(v>>8), byte(v)),
		}}
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{&dns.SOA{
			Hdr: dns.RR_Header{Name: "bench.test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 3600},
			Ns:  "ns.bench.test.", Mbox: "hostmaster.bench.test.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 300,
		}}
	}
	if o := r.IsEdns0(); o != nil {
		m.SetEdns0(o.UDPSize(), false)
	}
	w.WriteMsg(m)
}
