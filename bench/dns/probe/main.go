// Command probe measures DNS latency one query at a time (dnsperf reports
// throughput and a mean; this gives percentiles): warm mode repeats a set
// of names, cold mode asks names nobody asked before, so every query is a
// cache miss.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"time"

	"github.com/miekg/dns"
)

func main() {
	server := flag.String("server", "127.0.0.1:5391", "DNS server")
	n := flag.Int("n", 2000, "queries")
	names := flag.Int("names", 1000, "warm mode: distinct names n0..nN.bench.test")
	cold := flag.Bool("cold", false, "ask a fresh random name each time")
	flag.Parse()

	conn, err := net.Dial("udp", *server)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	co := &dns.Conn{Conn: conn}
	run := rand.Uint64()
	lat := make([]time.Duration, 0, *n)
	failed := 0
	for i := range *n {
		name := fmt.Sprintf("n%d.bench.test.", i%*names)
		if *cold {
			name = fmt.Sprintf("c%x-%d.bench.test.", run, i)
		}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.SetEdns0(1232, false)
		resp, rtt, err := c.ExchangeWithConn(m, co)
		if err != nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
			failed++
			continue
		}
		lat = append(lat, rtt)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	fmt.Printf("p50_ms=%.3f p99_ms=%.3f ok=%d failed=%d\n", pct(0.50), pct(0.99), len(lat), failed)
}
