package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one bench run (one proxy process, one protocol): a JSON line.
type Result struct {
	Name  string   `json:"name"`
	Proto string   `json:"proto"`
	Round int      `json:"round"`
	Start string   `json:"start"`
	KA1   *Rate    `json:"ka1,omitempty"`
	KA    *Rate    `json:"ka,omitempty"`
	NC    *Rate    `json:"nc,omitempty"`
	Thr   *Through `json:"thr,omitempty"`
	Conc  int      `json:"c"`
	PIDs  []int    `json:"pids"`
}

// Rate is a request-rate test: requests done, seconds, and the proxy's
// CPU seconds over the test (-1: no -pid).
type Rate struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	RPS      float64 `json:"rps"`
	ProxyCPU float64 `json:"proxy_cpu_s"`
	FirstErr string  `json:"first_error,omitempty"`
}

// Through is the one-tunnel download: MB/s (1e6 B/s) per run and the
// proxy's CPU seconds over all runs.
type Through struct {
	Bytes    int64     `json:"bytes"`
	MBps     []float64 `json:"mbps"`
	ProxyCPU float64   `json:"proxy_cpu_s"`
	FirstErr string    `json:"first_error,omitempty"`
}

func cmdBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	name := fs.String("name", "", "label for this proxy")
	proxy := fs.String("proxy", "127.0.0.1:14000", "proxy host:port")
	target := fs.String("target", "up.bench.test:18445", "CONNECT target (and Host)")
	caFile := fs.String("ca", "", "CA the proxy's leaves chain to (the minting CA)")
	proto := fs.String("proto", "h2", "h1 or h2 inside the tunnel")
	pidList := fs.String("pid", "", "proxy PID(s), comma-separated, for CPU")
	round := fs.Int("round", 1, "round number (for the report)")
	tests := fs.String("tests", "ka1,ka,nc,thr", "tests to run")
	conc := fs.Int("c", 32, "concurrency: streams in ka1 (h2), tunnels in ka, workers in nc")
	dur := fs.Duration("dur", 10*time.Second, "time limit of ka1, ka, nc")
	max := fs.Int("max", 20000, "request limit of ka1, ka, nc")
	thrBytes := fs.Int64("thr-bytes", 1<<30, "bytes per throughput run")
	thrRuns := fs.Int("thr-runs", 3, "throughput runs")
	opTimeout := fs.Duration("op-timeout", 10*time.Second, "deadline of one tunnel set-up or request")
	out := fs.String("out", "", "append the JSON result line to this file (empty: stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return fmt.Errorf("h2load bench: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("h2load bench: no certificates in %s", *caFile)
	}
	host, _, err := net.SplitHostPort(*target)
	if err != nil {
		return fmt.Errorf("h2load bench: -target: %w", err)
	}
	c, err := newClient(*proxy, *target, *proto, &tls.Config{
		RootCAs:          pool,
		ServerName:       host,
		CurvePreferences: []tls.CurveID{tls.X25519}, // as the peer bench's client; no session cache: every handshake is full
	}, *opTimeout)
	if err != nil {
		return err
	}
	pids, err := parsePIDs(*pidList)
	if err != nil {
		return err
	}
	cpu := func() float64 {
		if len(pids) == 0 {
			return -1
		}
		return procCPUSeconds(pids)
	}
	res := Result{Name: *name, Proto: *proto, Round: *round, Start: time.Now().UTC().Format(time.RFC3339), Conc: *conc, PIDs: pids}
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "[%s %s r%d] %s\n", *name, *proto, *round, fmt.Sprintf(format, a...))
	}
	// warm-up, as the peer bench's client: lazy initialisation is not counted
	for range 8 {
		cn, err := c.open(time.Now().Add(c.opTimeout))
		if err != nil {
			return fmt.Errorf("h2load bench: warm-up through %s: %w", *proxy, err)
		}
		_, err = cn.get("/small", true, time.Now().Add(c.opTimeout))
		cn.Close()
		if err != nil {
			return fmt.Errorf("h2load bench: warm-up through %s: %w", *proxy, err)
		}
	}
	want := map[string]bool{}
	for _, t := range strings.Split(*tests, ",") {
		want[strings.TrimSpace(t)] = true
	}
	lim := limits{conc: *conc, dur: *dur, max: *max, op: *opTimeout}
	show := func(what string, r *Rate) {
		logf("%s: %d req in %.2fs = %.0f req/s, proxy CPU %.0f µs/req, %d errors %s",
			what, r.Requests, r.Seconds, r.RPS, perReqMicros(r), r.Errors, r.FirstErr)
	}
	if want["ka1"] {
		res.KA1 = runKA1(c, lim, cpu)
		show("ka1 (one tunnel)", res.KA1)
	}
	if want["ka"] {
		res.KA = runKA(c, lim, cpu)
		show("ka ("+strconv.Itoa(*conc)+" tunnels)", res.KA)
	}
	if want["nc"] {
		res.NC = runNC(c, lim, cpu)
		show("nc (new tunnel per request)", res.NC)
	}
	if want["thr"] {
		res.Thr = runThr(c, *thrBytes, *thrRuns, cpu)
		logf("thr: %v MB/s %s", res.Thr.MBps, res.Thr.FirstErr)
	}
	return writeResult(*out, res)
}

type limits struct {
	conc int
	dur  time.Duration
	max  int
	op   time.Duration // deadline of one request
}

// rate runs workers that each call one until the time or the request
// limit is reached, and counts.
func rate(lim limits, workers int, cpu func() float64, one func(w int, deadline time.Time) error) *Rate {
	var issued, done, nerr atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	c0 := cpu()
	start := time.Now()
	end := start.Add(lim.dur)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				now := time.Now()
				if !now.Before(end) || issued.Add(1) > int64(lim.max) {
					return
				}
				if err := one(w, now.Add(lim.op)); err != nil {
					nerr.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	r := &Rate{Requests: int(done.Load()), Errors: int(nerr.Load()), Seconds: el, RPS: float64(done.Load()) / el, ProxyCPU: -1}
	if c0 >= 0 {
		r.ProxyCPU = cpu() - c0
	}
	if v := first.Load(); v != nil {
		r.FirstErr = v.(string)
	}
	return r
}

// runKA1: one tunnel; h2 multiplexes lim.conc streams on it, h1 sends one
// request at a time.
func runKA1(c *client, lim limits, cpu func() float64) *Rate {
	cn, err := c.open(time.Now().Add(c.opTimeout))
	if err != nil {
		return &Rate{Errors: 1, FirstErr: err.Error(), ProxyCPU: -1}
	}
	defer cn.Close()
	workers := lim.conc
	if c.proto == "h1" {
		workers = 1
	}
	return rate(lim, workers, cpu, func(_ int, d time.Time) error {
		_, err := cn.get("/small", false, d)
		return err
	})
}

// runKA: lim.conc tunnels, set up before the clock starts, one request at
// a time on each.
func runKA(c *client, lim limits, cpu func() float64) *Rate {
	conns := make([]conn, lim.conc)
	for i := range conns {
		cn, err := c.open(time.Now().Add(c.opTimeout))
		if err != nil {
			for _, o := range conns[:i] {
				o.Close()
			}
			return &Rate{Errors: 1, FirstErr: err.Error(), ProxyCPU: -1}
		}
		conns[i] = cn
	}
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	return rate(lim, lim.conc, cpu, func(w int, d time.Time) error {
		_, err := conns[w].get("/small", false, d)
		return err
	})
}

// runNC: every request is a new tunnel.
func runNC(c *client, lim limits, cpu func() float64) *Rate {
	return rate(lim, lim.conc, cpu, func(_ int, d time.Time) error {
		cn, err := c.open(d)
		if err != nil {
			return err
		}
		defer cn.Close()
		_, err = cn.get("/small", true, d)
		return err
	})
}

// runThr downloads n bytes through one tunnel, runs times.
func runThr(c *client, n int64, runs int, cpu func() float64) *Through {
	t := &Through{Bytes: n}
	c0 := cpu()
	for range runs {
		d := time.Now().Add(2 * time.Minute)
		cn, err := c.open(d)
		if err == nil {
			start := time.Now()
			var got int64
			got, err = cn.get("/bytes?n="+strconv.FormatInt(n, 10), true, d)
			cn.Close()
			if err == nil && got != n {
				err = fmt.Errorf("short body: %d of %d", got, n)
			}
			if err == nil {
				t.MBps = append(t.MBps, float64(n)/1e6/time.Since(start).Seconds())
			}
		}
		if err != nil && t.FirstErr == "" {
			t.FirstErr = err.Error()
		}
	}
	t.ProxyCPU = -1
	if c0 >= 0 {
		t.ProxyCPU = cpu() - c0
	}
	return t
}

func writeResult(path string, res Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("h2load bench: %w", err)
	}
	if path == "" {
		fmt.Println(string(b))
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("h2load bench: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("h2load bench: %w", err)
	}
	return f.Close()
}

func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, errors.New("h2load bench: bad -pid " + strconv.Quote(s))
		}
		pids = append(pids, n)
	}
	return pids, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
