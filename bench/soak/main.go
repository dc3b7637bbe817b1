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
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
