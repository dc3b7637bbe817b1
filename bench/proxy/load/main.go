// Command load measures egressd's proxy against direct connections on
// loopback, in one run: bulk tunnel throughput, new TLS connections per
// second, added latency (p50/p99) and memory per idle tunnel.
//
// The proxy runs in a child process (this binary with -role proxy) so that
// its memory and CPU are measured alone; origins and clients run in the
// parent. The proxy's CPU per new connection (utime+stime of the child over
// the proxied connection run, divided by the connections made) is the
// figure to compare on a shared machine, where rates move with other load.
// -proxy-cpuprofile writes the child's CPU profile of that run alone.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/resolver"
)

// Sources: clients bind to 127.0.0.2 … 127.0.0.(1+nSources), each a pod, so
// that short connections do not run one source address out of ports.
const nSources = 20

func main() {
	role := flag.String("role", "bench", "bench or proxy (internal)")
	bulk := flag.Int64("bulk-bytes", 2<<30, "bytes per bulk transfer")
	dur := flag.Duration("conn-duration", 3*time.Second, "duration of each connection-rate run")
	workers := flag.Int("workers", 16, "concurrent connection workers")
	idle := flag.Int("idle-tunnels", 5000, "idle tunnels for the memory figure")
	jsonOut := flag.String("json", "", "also write the figures as JSON to this file")
	only := flag.String("only", "bulk,conn,idle", "comma-separated parts to run: bulk, conn, idle")
	prof := flag.String("proxy-cpuprofile", "", "write the proxy's CPU profile of the proxied connection run to this file")
	flag.Parse()
	raiseNoFile()
	var err error
	if *role == "proxy" {
		err = runProxy()
	} else {
		parts := map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			parts[strings.TrimSpace(p)] = true
		}
		err = runBench(*bulk, *dur, *workers, *idle, *jsonOut, parts, *prof)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// raiseNoFile lifts the soft descriptor limit to the hard one: 5,000 idle
// tunnels need 10,000 descriptors on each side.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

type lookup struct{}

func (lookup) LookupIP(context.Context, string) (resolver.Answer, error) {
	return resolver.Answer{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, TTL: 300, Cached: true}, nil
}

// runProxy is the child: a proxy on 127.0.0.1:0 whose address it prints,
// plus a control endpoint that reports memory after a GC.
func runProxy() error {
	ports := strings.Split(os.Getenv("LOAD_PORTS"), ",")
	y := "apiVersion: egressd.dev/v1alpha1\nkind: EgressPolicy\nmetadata: {name: bench, namespace: bench}\nspec:\n  podSelector: {}\n  egress:\n  - hosts: [\"bench.test\"]\n    ports: [" + strings.Join(ports, ", ") + "]\n    cidrs: [\"127.0.0.0/8\"]\n"
	snap, err := testutil.Snapshot(y)
	if err != nil {
		return err
	}
	store := identity.NewStore()
	var pods []*corev1.Pod
	for i := range nSources {
		ip := fmt.Sprintf("127.0.0.%d", 2+i)
		pods = append(pods, testutil.RunningPod("bench", "client-"+strconv.Itoa(i), "", ip, nil))
	}
	store.Replace(pods)
	m := metrics.New()
	p, err := proxy.New(proxy.Config{
		Inputs:   admit.Inputs{Policy: func() *policy.Snapshot { return snap }, Identity: store},
		Resolver: lookup{},
		Guard:    policy.NewGuard(policy.GuardConfig{}),
		// Records are encoded and written as in production, to a discard
		// sink: their cost is part of the figure.
		Audit:   audit.New(audit.Config{Writers: []io.Writer{io.Discard}, Metrics: m}),
		Metrics: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var profFile *os.File
	go http.Serve(ctl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/profile/start":
			f, err := os.Create(r.URL.Query().Get("file"))
			if err == nil {
				if err = pprof.StartCPUProfile(f); err == nil {
					profFile = f
				}
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		case "/profile/stop":
			pprof.StopCPUProfile()
			if profFile != nil {
				profFile.Close()
			}
			return
		}
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		json.NewEncoder(w).Encode(map[string]uint64{
			"heap_inuse": ms.HeapInuse, "stack_inuse": ms.StackInuse, "goroutines": uint64(runtime.NumGoroutine()),
			"rss": rss(os.Getpid()),
		})
	}))
	fmt.Printf("%s %s\n", ln.Addr(), ctl.Addr())
	return p.ServeProxy(ln)
}

// rss returns a process's resident set size in bytes.
func rss(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

type figures struct {
	BulkDirectMBps    float64 `json:"bulk_direct_MBps"`
	BulkProxyMBps     float64 `json:"bulk_proxy_MBps"`
	BulkRatio         float64 `json:"bulk_ratio"`
	ConnDirectPerSec  float64 `json:"conn_direct_per_s"`
	ConnProxyPerSec   float64 `json:"conn_proxy_per_s"`
	ConnRatio         float64 `json:"conn_ratio"`
	LatDirectP50ms    float64 `json:"latency_direct_p50_ms"`
	LatDirectP99ms    float64 `json:"latency_direct_p99_ms"`
	LatProxyP50ms     float64 `json:"latency_proxy_p50_ms"`
	LatProxyP99ms     float64 `json:"latency_proxy_p99_ms"`
	AddedP50ms        float64 `json:"added_latency_p50_ms"`
	AddedP99ms        float64 `json:"added_latency_p99_ms"`
	ProxyCPUPerConnUS float64 `json:"proxy_cpu_per_conn_us"`
	IdleTunnels       int     `json:"idle_tunnels"`
	RSSPerTunnelKiB   float64 `json:"rss_per_idle_tunnel_KiB"`
	GoMemPerTunnelKiB float64 `json:"heap_stack_per_idle_tunnel_KiB"`
}

func runBench(bulk int64, dur time.Duration, workers, idle int, jsonOut string, parts map[string]bool, prof string) error {
	ca, err := certs.NewCA("load")
	if err != nil {
		return err
	}
	cert, err := ca.Issue("bench.test")
	if err != nil {
		return err
	}
	bulkLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go serveBulk(bulkLn, bulk)
	tlsLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return err
	}
	go serveTLS(tlsLn)
	holdLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go serveHold(holdLn)

	ports := []string{port(bulkLn), port(tlsLn), port(holdLn)}
	child := exec.Command(os.Args[0], "-role", "proxy")
	child.Env = append(os.Environ(), "LOAD_PORTS="+strings.Join(ports, ","))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer child.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("proxy child: %w", err)
	}
	addrs := strings.Fields(line)
	proxyAddr, ctlAddr := addrs[0], addrs[1]

	var f figures
	if parts["bulk"] {
		// Bulk: one stream, direct then proxied, best of three.
		f.BulkDirectMBps = best(3, func() (float64, error) { return bulkRun("", bulkLn.Addr().String(), bulk) })
		f.BulkProxyMBps = best(3, func() (float64, error) { return bulkRun(proxyAddr, "bench.test:"+port(bulkLn), bulk) })
		f.BulkRatio = f.BulkProxyMBps / f.BulkDirectMBps
		fmt.Printf("bulk throughput: direct %.0f MB/s, proxied %.0f MB/s, ratio %.1f%%\n", f.BulkDirectMBps, f.BulkProxyMBps, 100*f.BulkRatio)
	}
	if parts["conn"] {
		if err := connFigures(&f, proxyAddr, ctlAddr, child.Process.Pid, "bench.test:"+port(tlsLn), tlsLn.Addr().String(), ca.CertPool(), dur, workers, prof); err != nil {
			return err
		}
	}
	if parts["idle"] {
		if err := idleFigures(&f, proxyAddr, ctlAddr, "bench.test:"+port(holdLn), idle); err != nil {
			return err
		}
	}
	if jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// connFigures measures new TLS connections, direct and proxied: the rate,
// the latency of one sequential client and the proxy's CPU per connection.
func connFigures(f *figures, proxyAddr, ctlAddr string, pid int, target, direct string, pool *x509.CertPool, dur time.Duration, workers int, prof string) error {
	dRate, _, dFail := connRun("", direct, pool, dur, workers)
	if prof != "" {
		if _, err := ctlGet(ctlAddr, "/profile/start?file="+prof); err != nil {
			return err
		}
	}
	cpu0 := procCPU(pid)
	pRate, pOK, pFail := connRun(proxyAddr, target, pool, dur, workers)
	cpu := procCPU(pid) - cpu0
	if prof != "" {
		if _, err := ctlGet(ctlAddr, "/profile/stop"); err != nil {
			return err
		}
	}
	if n := len(pOK); n > 0 {
		f.ProxyCPUPerConnUS = float64(cpu.Microseconds()) / float64(n)
	}
	if dFail+pFail > 0 {
		fmt.Printf("connection failures: direct %d, proxied %d\n", dFail, pFail)
	}
	// Latency from one sequential client, so that queueing behind other
	// workers does not hide what the proxy adds.
	_, dLat, _ := connRun("", direct, pool, dur/2, 1)
	_, pLat, _ := connRun(proxyAddr, target, pool, dur/2, 1)
	f.ConnDirectPerSec, f.ConnProxyPerSec, f.ConnRatio = dRate, pRate, pRate/dRate
	f.LatDirectP50ms, f.LatDirectP99ms = pct(dLat, 50), pct(dLat, 99)
	f.LatProxyP50ms, f.LatProxyP99ms = pct(pLat, 50), pct(pLat, 99)
	f.AddedP50ms, f.AddedP99ms = f.LatProxyP50ms-f.LatDirectP50ms, f.LatProxyP99ms-f.LatDirectP99ms
	fmt.Printf("new TLS connections/s (%d workers): direct %.0f, proxied %.0f, ratio %.1f%%; proxy CPU %.0f µs per connection\n",
		workers, dRate, pRate, 100*f.ConnRatio, f.ProxyCPUPerConnUS)
	fmt.Printf("connect+handshake+first byte latency: direct p50 %.3f ms p99 %.3f ms; proxied p50 %.3f ms p99 %.3f ms; added p50 %.3f ms p99 %.3f ms\n",
		f.LatDirectP50ms, f.LatDirectP99ms, f.LatProxyP50ms, f.LatProxyP99ms, f.AddedP50ms, f.AddedP99ms)
	return nil
}

// idleFigures opens idle tunnels and measures the proxy's memory per tunnel.
func idleFigures(f *figures, proxyAddr, ctlAddr, target string, idle int) error {
	before, err := memOf(ctlAddr)
	if err != nil {
		return err
	}
	conns, err := openIdle(proxyAddr, target, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		return fmt.Errorf("after %d idle tunnels: %w", len(conns), err)
	}
	after, err := memOf(ctlAddr)
	if err != nil {
		return err
	}
	f.IdleTunnels = len(conns)
	f.RSSPerTunnelKiB = float64(after["rss"]-before["rss"]) / float64(len(conns)) / 1024
	f.GoMemPerTunnelKiB = float64(after["heap_inuse"]+after["stack_inuse"]-before["heap_inuse"]-before["stack_inuse"]) / float64(len(conns)) / 1024
	fmt.Printf("idle tunnels: %d open, %d goroutines in the proxy; per tunnel: RSS %.1f KiB, Go heap+stacks %.1f KiB\n",
		len(conns), after["goroutines"], f.RSSPerTunnelKiB, f.GoMemPerTunnelKiB)
	return nil
}

// procCPU returns the user and system CPU a process has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func ctlGet(ctl, path string) ([]byte, error) {
	resp, err := http.Get("http://" + ctl + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s %s", path, resp.Status, b)
	}
	return b, err
}

func port(ln net.Listener) string { return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) }

func best(n int, f func() (float64, error)) float64 {
	var b float64
	for range n {
		v, err := f()
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			continue
		}
		b = max(b, v)
	}
	return b
}

var srcN atomic.Uint32

// dial connects from the next source address, through the proxy with
// CONNECT when proxyAddr is set.
func dial(proxyAddr, target string) (net.Conn, error) {
	src := net.IPv4(127, 0, 0, byte(2+srcN.Add(1)%nSources))
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	if proxyAddr == "" {
		return d.Dial("tcp", target)
	}
	c, err := d.Dial("tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	// Read the 200 byte by byte: what follows belongs to the tunnel.
	var head []byte
	b := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := c.Read(b); err != nil {
			c.Close()
			return nil, err
		}
		head = append(head, b[0])
	}
	if !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		c.Close()
		return nil, fmt.Errorf("CONNECT: %q", head)
	}
	return c, nil
}

// serveBulk sends n bytes to every connection after its first byte.
func serveBulk(ln net.Listener, n int64) {
	buf := make([]byte, 256<<10)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			one := make([]byte, 1)
			if _, err := c.Read(one); err != nil {
				return
			}
			for left := n; left > 0; {
				k, err := c.Write(buf[:min(int64(len(buf)), left)])
				if err != nil {
					return
				}
				left -= int64(k)
			}
		}()
	}
}

func bulkRun(proxyAddr, target string, n int64) (float64, error) {
	c, err := dial(proxyAddr, target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("G")); err != nil {
		return 0, err
	}
	got, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
	if err != nil {
		return 0, err
	}
	if got != n {
		return 0, fmt.Errorf("bulk: got %d of %d bytes", got, n)
	}
	return float64(n) / time.Since(start).Seconds() / 1e6, nil
}

// serveTLS answers one byte after each handshake and closes.
func serveTLS(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if err := c.(*tls.Conn).Handshake(); err != nil {
				return
			}
			c.Write([]byte("k"))
			io.Copy(io.Discard, c)
		}()
	}
}

// connRun opens connections for dur from workers goroutines, each with a
// TLS handshake and one byte read; it returns connections per second, the
// latency of each and the number of failures.
func connRun(proxyAddr, target string, pool *x509.CertPool, dur time.Duration, workers int) (float64, []time.Duration, int64) {
	deadline := time.Now().Add(dur)
	var (
		mu     sync.Mutex
		lats   []time.Duration
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var local []time.Duration
			b := make([]byte, 1)
			for time.Now().Before(deadline) {
				t0 := time.Now()
				c, err := dial(proxyAddr, target)
				if err != nil {
					failed.Add(1)
					continue
				}
				tc := tls.Client(c, &tls.Config{ServerName: "bench.test", RootCAs: pool})
				if _, err := io.ReadFull(tc, b); err == nil {
					local = append(local, time.Since(t0))
				} else {
					failed.Add(1)
				}
				tc.Close()
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(len(lats)) / time.Since(start).Seconds(), lats, failed.Load()
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := min(len(d)-1, len(d)*p/100)
	return float64(d[i].Microseconds()) / 1000
}

// serveHold answers the first byte and then holds the connection open.
func serveHold(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			one := make([]byte, 1)
			if _, err := c.Read(one); err != nil {
				c.Close()
				return
			}
			c.Write([]byte("y"))
			io.Copy(io.Discard, c)
			c.Close()
		}()
	}
}

// openIdle opens n tunnels, moves one byte each way (past the observation
// phase) and leaves them idle.
func openIdle(proxyAddr, target string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	sem := make(chan struct{}, 64)
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dial(proxyAddr, target)
			if err == nil {
				_, err = c.Write([]byte("x"))
			}
			if err == nil {
				_, err = io.ReadFull(c, make([]byte, 1))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				if c != nil {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	return conns, firstErr
}

func memOf(ctl string) (map[string]uint64, error) {
	resp, err := http.Get("http://" + ctl + "/")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]uint64
	return m, json.NewDecoder(resp.Body).Decode(&m)
}
