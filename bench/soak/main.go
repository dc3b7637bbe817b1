// Command soak runs the real egressd binary under steady mixed load for a
// while, with its policy files rewritten every 2 s and its pods file every
// second, then checks what a user relies on:
//
//   - every request the clients made has exactly one end record (counted
//     per client address and kind; rate-limit summaries count as their
//     count), and no id has two end records;
//   - no unexpected client error;
//   - RSS after warm-up grows less than -max-rss-growth;
//   - goroutines and open fds return to their baseline after the load;
//   - the process never restarted and exits 0 on SIGTERM.
//
// Everything runs on 127.0.0.0/8: clients bind to 127.0.0.2-6 (pods),
// 127.0.0.7 (a pod that comes and goes, and is relabelled) and 127.0.0.9
// (no pod). The metadata address is asked for through egressd, which
// refuses it by classification: nothing dials it.
//
//	go run ./bench/soak -egressd bin/egressd -duration 3m
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
)

func main() {
	bin := flag.String("egressd", "bin/egressd", "the egressd binary")
	dur := flag.Duration("duration", 3*time.Minute, "how long the load runs")
	rate := flag.Int("rate", 60, "requests per second per worker loop (all kinds together about 12 loops)")
	maxGrowth := flag.Float64("max-rss-growth", 0.10, "largest allowed RSS growth after warm-up (fraction)")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	code, err := run(*bin, *dur, *rate, *maxGrowth, *keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
	os.Exit(code)
}

// imageGODEBUG is the GODEBUG the image runs egressd with (Dockerfile;
// cmd/egressd's TestImageGODEBUG keeps the two in step): the soak runs
// what ships.
const imageGODEBUG = "schedtrace=2147483647"

// kinds of request, as the audit record's kind.
const (
	kConnect = "connect"
	kHTTP    = "http"
	kDNS     = "dns"
)

// tally counts requests per client address and kind.
type tally struct {
	mu sync.Mutex
	n  map[string]int64 // "ip kind"
}

func (t *tally) add(ip, kind string, n int64) {
	t.mu.Lock()
	if t.n == nil {
		t.n = map[string]int64{}
	}
	t.n[ip+" "+kind] += n
	t.mu.Unlock()
}

type soak struct {
	dir      string
	caPool   *x509.CertPool
	tlsPort  string
	httpPort string
	dnsUp    string
	proxy    string
	dnsAddr  string
	metrics  string
	sent     tally
	errs     sync.Map // error text → *atomic.Int64
	nErrs    atomic.Int64
	requests atomic.Int64
	// originErrs counts the TLS origin's log lines: handshakes cut by
	// tunnels that policy churn revokes mid-handshake, expected and
	// counted instead of printed one by one.
	originErrs lineCounter
}

// lineCounter is a log writer that counts the lines written to it.
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

func (s *soak) fail(what string, err error) {
	s.nErrs.Add(1)
	msg := what + ": " + err.Error()
	if len(msg) > 160 {
		msg = msg[:160]
	}
	v, _ := s.errs.LoadOrStore(msg, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func run(bin string, dur time.Duration, rate int, maxGrowth float64, keep bool) (int, error) {
	dir, err := os.MkdirTemp("", "egressd-soak-")
	if err != nil {
		return 2, err
	}
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("work directory:", dir)
	}
	s := &soak{dir: dir}
	stopWorld, err := s.startWorld()
	if err != nil {
		return 2, err
	}
	defer stopWorld()

	policyDir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		return 2, err
	}
	s.writePolicies(policyDir, 0)
	podsFile := filepath.Join(dir, "pods.yaml")
	s.writePods(podsFile, 0)
	auditFile := filepath.Join(dir, "audit.jsonl")

	cmd := exec.Command(bin, "run", "--policy", policyDir, "--pods", podsFile,
		"--proxy-addr", "127.0.0.1:0", "--dns-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--upstream-dns", s.dnsUp, "--audit-file", auditFile, "--reload-interval", "250ms",
		"--drain-timeout", "5s", "--log-level", "info")
	cmd.Env = append(os.Environ(), "GODEBUG="+imageGODEBUG)
	cmd.Stdout = io.Discard // the same records go to the audit file
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 2, err
	}
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	exited := make(chan error, 1)
	ready := make(chan struct{})
	logFile, _ := os.Create(filepath.Join(dir, "egressd.log"))
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "egressd serving" {
				s.proxy, _ = line["proxy"].(string)
				s.dnsAddr, _ = line["dns"].(string)
				s.metrics, _ = line["metrics"].(string)
				once.Do(func() { close(ready) })
			}
		}
	}()
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		return 2, fmt.Errorf("egressd exited before serving: %v", err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return 2, errors.New("egressd did not start in 30s")
	}
	pid := cmd.Process.Pid
	fmt.Printf("egressd pid %d: proxy %s, dns %s, metrics %s; load for %s\n", pid, s.proxy, s.dnsAddr, s.metrics, dur)

	// Warm-up: every kind of request once for a few seconds, so that what
	// egressd starts on first use and keeps (timers, socket pools, parked
	// readers) is in the baseline; then the baseline of goroutines and fds.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	var warmWG sync.WaitGroup
	s.load(wctx, &warmWG, rate)
	warmWG.Wait()
	wcancel()
	time.Sleep(2 * time.Second) // closed connections are reaped
	baseG, baseFD, err := s.gauges()
	if err != nil {
		return 2, err
	}

	loadStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	// Churn: policies every 2 s, pods every second.
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				s.writePolicies(policyDir, i)
			}
		}
	})
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				s.writePods(podsFile, i)
			}
		}
	})
	// RSS samples every second.
	var rssMu sync.Mutex
	var rss []int64
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if v, err := vmRSS(pid); err == nil {
					rssMu.Lock()
					rss = append(rss, v)
					rssMu.Unlock()
				}
			}
		}
	})
	s.load(ctx, &wg, rate)
	wg.Wait()
	loadEnd := time.Now()

	var problems []string
	// Goroutines and fds back to their baseline (keep-alive timers and
	// idle connections of the clients are gone: every client closed).
	var endG, endFD float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		endG, endFD, err = s.gauges()
		if err == nil && endG <= baseG+5 && endFD <= baseFD+5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		problems = append(problems, "metrics after the load: "+err.Error())
	} else {
		if endG > baseG+5 {
			problems = append(problems, fmt.Sprintf("goroutines %v after the load, baseline %v", endG, baseG))
		}
		if endFD > baseFD+5 {
			problems = append(problems, fmt.Sprintf("open fds %v after the load, baseline %v", endFD, baseFD))
		}
	}
	select {
	case err := <-exited:
		problems = append(problems, fmt.Sprintf("egressd exited during the load: %v", err))
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		problems = append(problems, "SIGTERM: "+err.Error())
	}
	select {
	case err := <-exited:
		if err != nil {
			problems = append(problems, fmt.Sprintf("egressd exit after SIGTERM: %v", err))
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		problems = append(problems, "egressd did not exit within 30s of SIGTERM")
	}

	// RSS: the largest sample of the last fifth against the sample at the
	// end of the warm-up (the first fifth).
	rssMu.Lock()
	samples := append([]int64(nil), rss...)
	rssMu.Unlock()
	var warm, late int64
	if n := len(samples); n >= 10 {
		warm = maxOf(samples[n/5-2 : n/5+1])
		late = maxOf(samples[n-n/5:])
		if growth := float64(late-warm) / float64(warm); growth > maxGrowth {
			problems = append(problems, fmt.Sprintf("RSS grew %.1f%% after warm-up (%d → %d KiB), limit %.0f%%", 100*growth, warm, late, 100*maxGrowth))
		}
	} else {
		problems = append(problems, fmt.Sprintf("only %d RSS samples", n))
	}

	got, ends, interims, dupIDs, bad, err := readRecords(auditFile)
	if err != nil {
		problems = append(problems, "audit file: "+err.Error())
	}
	if dupIDs > 0 {
		problems = append(problems, fmt.Sprintf("%d ids with more than one end record", dupIDs))
	}
	if bad > 0 {
		problems = append(problems, fmt.Sprintf("%d audit lines that are not records", bad))
	}
	keys := map[string]bool{}
	for k := range s.sent.n {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	fmt.Printf("\n%-22s %10s %10s\n", "client kind", "requests", "records")
	for _, k := range sorted {
		mark := ""
		if s.sent.n[k] != got[k] {
			mark = "  MISMATCH"
			problems = append(problems, fmt.Sprintf("%s: %d requests, %d end records", k, s.sent.n[k], got[k]))
		}
		fmt.Printf("%-22s %10d %10d%s\n", k, s.sent.n[k], got[k], mark)
	}
	s.errs.Range(func(k, v any) bool {
		problems = append(problems, fmt.Sprintf("client error ×%d: %s", v.(*atomic.Int64).Load(), k))
		return true
	})
	elapsed := loadEnd.Sub(loadStart).Round(time.Second)
	fmt.Printf("\nrequests %d in %s (%.0f/s); end records %d, interim %d\n", s.requests.Load(), elapsed, float64(s.requests.Load())/elapsed.Seconds(), ends, interims)
	fmt.Printf("RSS after warm-up %d KiB, at the end %d KiB; goroutines %v → %v; fds %v → %v\n", warm, late, baseG, endG, baseFD, endFD)
	fmt.Printf("TLS origin's log lines (handshakes cut short, e.g. by revoked tunnels): %d\n", s.originErrs.n.Load())
	if len(problems) > 0 {
		fmt.Println("\nFAIL")
		for _, p := range problems {
			fmt.Println(" -", p)
		}
		return 1, nil
	}
	fmt.Println("\nPASS")
	return 0, nil
}

// load starts the client loops on wg until ctx ends.
func (s *soak) load(ctx context.Context, wg *sync.WaitGroup, rate int) {
	pods := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}
	every := time.Second / time.Duration(max(rate, 1))
	for _, ip := range pods {
		wg.Go(func() { s.loop(ctx, every, func() { s.newConn(ip, "ok.soak.test", s.tlsPort, true) }) })
		wg.Go(func() { s.loop(ctx, every, func() { s.httpGet(ip) }) })
		wg.Go(func() { s.loop(ctx, every, func() { s.query(ip, "udp", "ok.soak.test.") }) })
		wg.Go(func() { s.keepAlive(ctx, ip) })
	}
	wg.Go(func() { s.loop(ctx, every, func() { s.query("127.0.0.2", "tcp", "keep.soak.test.") }) })
	wg.Go(func() { s.loop(ctx, every, func() { s.query("127.0.0.3", "udp", "denied.soak.test.") }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.4", "denied.soak.test", s.tlsPort, false) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.5", "169.254.169.254", "80", false) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.6", "churn.soak.test", s.tlsPort, true) }) })
	wg.Go(func() { s.loop(ctx, every*2, func() { s.newConn("127.0.0.7", "ok.soak.test", s.tlsPort, true) }) })
	wg.Go(func() { s.loop(ctx, every*4, func() { s.newConn("127.0.0.9", "ok.soak.test", s.tlsPort, false) }) })
	wg.Go(func() { s.loop(ctx, every*4, func() { s.query("127.0.0.9", "udp", "ok.soak.test.") }) })
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// loop calls f every interval (jittered) until ctx ends.
func (s *soak) loop(ctx context.Context, every time.Duration, f func()) {
	for ctx.Err() == nil {
		f()
		d := every/2 + rand.N(every)
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", addr)
}

// connect sends a CONNECT from src and returns the connection and status.
// The request counts once it is written.
func (s *soak) connect(src, host, port string) (net.Conn, *bufio.Reader, int, error) {
	c, err := dialFrom(src, s.proxy)
	if err != nil {
		return nil, nil, 0, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	target := net.JoinHostPort(host, port)
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, nil, 0, err
	}
	s.count(src, kConnect)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return c, br, resp.StatusCode, nil
}

func (s *soak) count(src, kind string) {
	s.sent.add(src, kind, 1)
	s.requests.Add(1)
}

// newConn: one CONNECT, a full TLS handshake and GET /small when allowed.
func (s *soak) newConn(src, host, port string, mayAllow bool) {
	c, br, status, err := s.connect(src, host, port)
	if err != nil {
		s.fail("connect "+host, err)
		return
	}
	defer c.Close()
	if status != http.StatusOK {
		if status != http.StatusForbidden {
			s.fail("connect "+host, fmt.Errorf("status %d", status))
		}
		return
	}
	if !mayAllow {
		s.fail("connect "+host, errors.New("allowed, want a denial"))
		return
	}
	if err := s.tlsGet(&bufConn{Conn: c, r: br}, host, 1); err != nil && !revokedErr(err) {
		s.fail("tls "+host, err)
	}
}

// revokedErr: a tunnel cut by a policy or pod change (churn hosts) reads
// EOF or a reset; that is the product working.
func revokedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// tlsGet does n GET /small over one TLS connection.
func (s *soak) tlsGet(c net.Conn, host string, n int) error {
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: s.caPool})
	if err := tc.Handshake(); err != nil {
		return err
	}
	br := bufio.NewReader(tc)
	for range n {
		if _, err := fmt.Fprintf(tc, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET status %d", resp.StatusCode)
		}
	}
	return nil
}

// keepAlive holds tunnels open for 1–10 s each, a GET every 100 ms.
func (s *soak) keepAlive(ctx context.Context, src string) {
	for ctx.Err() == nil {
		c, br, status, err := s.connect(src, "keep.soak.test", s.tlsPort)
		if err != nil {
			s.fail("keep-alive connect", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if status != http.StatusOK {
			s.fail("keep-alive connect", fmt.Errorf("status %d", status))
			c.Close()
			continue
		}
		_ = c.SetDeadline(time.Time{})
		tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "keep.soak.test", RootCAs: s.caPool})
		end := time.Now().Add(time.Second + rand.N(9*time.Second))
		err = tc.Handshake()
		r := bufio.NewReader(tc)
		for err == nil && time.Now().Before(end) && ctx.Err() == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err = io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: keep.soak.test\r\n\r\n"); err != nil {
				break
			}
			var resp *http.Response
			if resp, err = http.ReadResponse(r, nil); err != nil {
				break
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			s.fail("keep-alive", err)
		}
		c.Close()
	}
}

// httpGet: absolute-form GET through the proxy on a fresh connection.
func (s *soak) httpGet(src string) {
	c, err := dialFrom(src, s.proxy)
	if err != nil {
		s.fail("http dial", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	u := "http://ok.soak.test:" + s.httpPort + "/small?token=SECRET"
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ok.soak.test:%s\r\nConnection: close\r\n\r\n", u, s.httpPort); err != nil {
		s.fail("http write", err)
		return
	}
	s.count(src, kHTTP)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		s.fail("http read", err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		s.fail("http", fmt.Errorf("status %d", resp.StatusCode))
	}
}

// query sends one DNS query from src over net (udp or tcp).
func (s *soak) query(src, network, name string) {
	var local net.Addr
	if network == "udp" {
		local = &net.UDPAddr{IP: net.ParseIP(src)}
	} else {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	cl := &dns.Client{Net: network, Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	conn, err := cl.Dial(s.dnsAddr)
	if err != nil {
		s.fail("dns dial "+network, err)
		return
	}
	defer conn.Close()
	if err := conn.WriteMsg(m); err != nil {
		s.fail("dns write "+network, err)
		return
	}
	s.count(src, kDNS)
	if _, err := conn.ReadMsg(); err != nil {
		s.fail("dns read "+network, err)
	}
}

// gauges reads go_goroutines and process_open_fds from /metrics.
func (s *soak) gauges() (goroutines, fds float64, err error) {
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := 0
	for sc.Scan() {
		line := sc.Text()
		for name, dst := range map[string]*float64{"go_goroutines ": &goroutines, "process_open_fds ": &fds} {
			if strings.HasPrefix(line, name) {
				v, perr := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
				if perr == nil {
					*dst = v
					found++
				}
			}
		}
	}
	if found != 2 {
		return 0, 0, errors.New("go_goroutines or process_open_fds missing from /metrics")
	}
	return goroutines, fds, nil
}

func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				return strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS")
}

// readRecords counts end records per "ip kind" (a summary record counts
// as its count), end and interim records, ids with more than one end
// record, and lines that are not records.
func readRecords(path string) (got map[string]int64, ends, interims, dupIDs, bad int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, 0, 0, err
	}
	defer f.Close()
	got = map[string]int64{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			ID     string `json:"id"`
			Kind   string `json:"kind"`
			Event  string `json:"event"`
			Count  int64  `json:"count"`
			Client struct {
				IP string `json:"ip"`
			} `json:"client"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" || r.Kind == "" {
			bad++
			continue
		}
		if r.Event == "interim" {
			interims++
			continue
		}
		ends++
		if seen[r.ID] {
			dupIDs++
		}
		seen[r.ID] = true
		n := int64(1)
		if r.Count > 0 {
			n = r.Count
		}
		kind := r.Kind
		if kind == "sni" {
			kind = kConnect
		}
		got[r.Client.IP+" "+kind] += n
	}
	return got, ends, interims, dupIDs, bad, sc.Err()
}

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
