// Command probe measures DNS latency one query at a time (dnsperf reports
// throughput and a mean; this gives percentiles): warm mode repeats a set
// of names, cold mode asks names nobody asked before, so every query is a
// cache miss.
//
// With -vs ADDR it alternates between -server and ADDR, query by query, so
// that both see the same moments of a shared machine's load, and prints a
// line for each; in cold mode it also prints the median of the per-pair
// difference (what -server adds over ADDR, e.g. egressd over its upstream).
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
	vs := flag.String("vs", "", "a second server, asked alternately with -server")
	n := flag.Int("n", 2000, "queries (per server)")
	names := flag.Int("names", 1000, "warm mode: distinct names n0..nN.bench.test")
	cold := flag.Bool("cold", false, "ask a fresh random name each time")
	flag.Parse()

	targets := []*target{{addr: *server}}
	if *vs != "" {
		targets = append(targets, &target{addr: *vs})
	}
	for _, t := range targets {
		conn, err := net.Dial("udp", t.addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
		t.co = &dns.Conn{Conn: conn}
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	run := rand.Uint64()
	var diffs []time.Duration
	for i := range *n {
		var rtts [2]time.Duration
		for j := range targets {
			// Alternate which goes first, so neither always follows the
			// other's wake-up.
			k := (i + j) % len(targets)
			t := targets[k]
			name := fmt.Sprintf("n%d.bench.test.", i%*names)
			if *cold {
				name = fmt.Sprintf("c%x-%d-%d.bench.test.", run, k, i)
			}
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			m.SetEdns0(1232, false)
			resp, rtt, err := c.ExchangeWithConn(m, t.co)
			if err != nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
				t.failed++
				rtts[k] = -1
				continue
			}
			t.lat = append(t.lat, rtt)
			rtts[k] = rtt
		}
		if len(targets) == 2 && rtts[0] >= 0 && rtts[1] >= 0 {
			diffs = append(diffs, rtts[0]-rtts[1])
		}
	}
	for _, t := range targets {
		prefix := ""
		if len(targets) > 1 {
			prefix = t.addr + " "
		}
		fmt.Printf("%sp50_ms=%.3f p99_ms=%.3f ok=%d failed=%d\n", prefix, pct(t.lat, 0.50), pct(t.lat, 0.99), len(t.lat), t.failed)
	}
	if len(diffs) > 0 {
		fmt.Printf("added_p50_ms=%.3f\n", pct(diffs, 0.50))
	}
}

type target struct {
	addr   string
	co     *dns.Conn
	lat    []time.Duration
	failed int
}

func pct(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}
