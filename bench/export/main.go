// Command export measures the OTLP export of audit records against a real
// VictoriaLogs (issue 27, Performance):
//
//  1. keep-up: an audit Logger whose one sink is the exporter takes
//     records at -rate for -duration; the spool is sampled every second
//     and must not grow. Rounds alternate with a Logger whose sink is a
//     file (/dev/null), and the process CPU per record of both is printed.
//
//  2. read-back: -records records written to a file and shipped to the
//     engine; `egressd report --format json` over the file and `--from`
//     the engine are timed in alternating rounds, and their rows compared.
//
//     go build -o bin/egressd ./cmd/egressd
//     go run ./bench/export -egressd bin/egressd -victoria-logs .tools/bin/victoria-logs
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/export"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	egressd := flag.String("egressd", "bin/egressd", "egressd binary (read-back)")
	vl := flag.String("victoria-logs", ".tools/bin/victoria-logs", "VictoriaLogs binary")
	rate := flag.Int("rate", 25000, "records per second (keep-up)")
	dur := flag.Duration("duration", 10*time.Second, "keep-up duration per round")
	n := flag.Int("records", 1000000, "records for the read-back (0 skips it)")
	rounds := flag.Int("rounds", 3, "alternating rounds")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "export bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*egressd, *vl, *rate, *dur, *n, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "export bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(egressd, vl string, rate int, dur time.Duration, n, rounds int) error {
	dir, err := os.MkdirTemp("", "export-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, stop, err := startEngine(vl, dir)
	if err != nil {
		return err
	}
	defer stop()
	otlp := base + "/insert/opentelemetry/v1/logs"
	fmt.Printf("keep-up: %d records/s for %s, %d rounds (file sink vs exporter sink)\n", rate, dur, rounds)
	for r := 1; r <= rounds; r++ {
		for _, on := range []bool{false, true} {
			res, err := keepUp(otlp, filepath.Join(dir, fmt.Sprintf("spool-%d", r)), rate, dur, on)
			if err != nil {
				return err
			}
			fmt.Printf("round %d %-8s records %d  cpu/record %.2f µs  spool max %d B (second half %d B)  left after %s: %d B\n",
				r, map[bool]string{false: "file", true: "export"}[on], res.records, res.cpuPerRecord, res.spoolMax, res.spoolMaxLate, dur, res.spoolEnd)
		}
	}
	if n == 0 {
		return nil
	}
	// The read-back's own engine: the keep-up rounds' records are not
	// the file's, and report --from reads every record the engine holds.
	stop()
	rdir := filepath.Join(dir, "readback")
	if base, stop, err = startEngine(vl, rdir); err != nil {
		return err
	}
	defer stop()
	return readBack(egressd, base, base+"/insert/opentelemetry/v1/logs", dir, n, rounds)
}

func startEngine(bin, dir string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-storageDataPath="+filepath.Join(dir, "vl"), "-httpListenAddr="+addr, "-loggerLevel=WARN", "-retentionPeriod=100y", "-search.maxQueryDuration=10m")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	base := "http://" + addr
	for i := 0; i < 300; i++ {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			return base, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("victoria-logs did not start")
}

// rec is the i-th record of a mix of kinds, 20 namespaces, 200 pods and
// 500 hosts.
func rec(i int, t time.Time) *record.Record {
	rule := i % 3
	ns := fmt.Sprintf("ns-%d", i%20)
	r := &record.Record{Time: t, Start: t.Add(-time.Millisecond), ID: fmt.Sprintf("%016x%016x", uint64(t.UnixNano()), uint64(i)),
		Kind: []string{record.KindConnect, record.KindDNS, record.KindHTTP, record.KindSNI}[i%4],
		Client: record.Client{IP: fmt.Sprintf("10.244.%d.%d", i%20, i%200), Namespace: ns, Pod: fmt.Sprintf("app-%d-abcde", i%200),
			ServiceAccount: "app", UID: fmt.Sprintf("uid-%d", i%200), Workload: &record.Workload{Kind: "Deployment", Name: fmt.Sprintf("app-%d", i%200)}},
		Host: fmt.Sprintf("h%d.example.com", i%500), Port: 443, Verdict: "allow", Reason: "allowed", Policy: ns + "/p", Rule: &rule,
		Peer: "203.0.113.10:443", BytesSent: 800, BytesReceived: 5000, DurationMS: 12.5, Outcome: "ok"}
	switch r.Kind {
	case record.KindDNS:
		r.Port, r.Peer, r.QType = 0, "", "A"
		r.DNS = &record.DNS{Answers: []string{"203.0.113.10"}, TTL: 60, Rcode: "NOERROR", MS: 1.2}
	case record.KindHTTP:
		r.Port = 80
		r.HTTP = &record.HTTP{Method: "GET", Status: 200}
	default:
		r.TLS = &record.TLS{SNI: r.Host, Version: "TLS1.3", Cipher: "TLS_AES_128_GCM_SHA256", Result: "established"}
	}
	if i%7 == 0 {
		r.Verdict, r.Reason, r.Outcome, r.Rule, r.Policy = "deny", "not-allowlisted", "refused", nil, ""
	}
	return r
}

type keepUpResult struct {
	records                          int
	cpuPerRecord                     float64
	spoolMax, spoolMaxLate, spoolEnd int64
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func keepUp(otlp, spool string, rate int, dur time.Duration, on bool) (keepUpResult, error) {
	m := metrics.New()
	reg := prometheus.NewRegistry()
	var w io.Writer
	var x *export.Exporter
	if on {
		var err error
		x, err = export.New(export.Config{Endpoint: otlp, SpoolDir: spool, Registerer: reg,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return keepUpResult{}, err
		}
		w = x
	} else {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return keepUpResult{}, err
		}
		defer f.Close()
		w = f
	}
	l := audit.New(audit.Config{Writers: []io.Writer{w}, Metrics: m})
	spoolBytes := func() int64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "egressd_audit_export_spool_bytes" {
				return int64(mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
		return 0
	}
	var res keepUpResult
	c0 := cpu()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	nextSample := start.Add(time.Second)
	for now := range tick.C {
		el := now.Sub(start)
		if el >= dur {
			break
		}
		want := int(el.Seconds() * float64(rate))
		for ; res.records < want; res.records++ {
			l.Write(rec(res.records, now))
		}
		if now.After(nextSample) {
			nextSample = nextSample.Add(time.Second)
			b := spoolBytes()
			res.spoolMax = max(res.spoolMax, b)
			if el > dur/2 {
				res.spoolMaxLate = max(res.spoolMaxLate, b)
			}
		}
	}
	_ = l.Close()
	res.spoolEnd = spoolBytes()
	if x != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := x.Close(ctx); err != nil {
			return res, err
		}
	}
	res.cpuPerRecord = float64((cpu() - c0).Microseconds()) / float64(res.records)
	return res, nil
}

func readBack(egressd, base, otlp, dir string, n, rounds int) error {
	file := filepath.Join(dir, "records.jsonl")
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	x, err := export.New(export.Config{Endpoint: otlp, SpoolDir: filepath.Join(dir, "spool-readback"), SpoolMax: 1 << 30})
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	l := audit.New(audit.Config{Writers: []io.Writer{x}, Metrics: metrics.New()})
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var line []byte
	for i := range n {
		r := rec(i, t0.Add(time.Duration(i)*time.Millisecond))
		if line, err = record.AppendJSON(line[:0], r); err != nil {
			return err
		}
		bw.Write(append(line, '\n'))
		l.Write(r)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	f.Close()
	_ = l.Close()
	shipStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := x.Close(ctx); err != nil {
		return err
	}
	if resp, err := http.Get(base + "/internal/force_flush"); err == nil {
		resp.Body.Close()
	}
	fmt.Printf("read-back: %d records shipped (last batches acknowledged %s after the last write)\n", n, time.Since(shipStart).Round(time.Millisecond))
	var files, engine []time.Duration
	var outF, outE []byte
	for r := 1; r <= rounds; r++ {
		d, out, err := timeReport(egressd, "--format", "json", file)
		if err != nil {
			return err
		}
		files, outF = append(files, d), out
		d, out, err = timeReport(egressd, "--format", "json", "--from", base)
		if err != nil {
			return err
		}
		engine, outE = append(engine, d), out
		q, qn, err := timeQuery(base)
		if err != nil {
			return err
		}
		fmt.Printf("round %d report files %s  report --from %s  ratio %.2f  (the engine's answer alone, read and dropped: %s, %d lines)\n",
			r, files[r-1].Round(time.Millisecond), d.Round(time.Millisecond), d.Seconds()/files[r-1].Seconds(), q.Round(time.Millisecond), qn)
	}
	slices.Sort(files)
	slices.Sort(engine)
	mf, me := files[len(files)/2], engine[len(engine)/2]
	fmt.Printf("median: files %s, --from %s: ratio %.2f (spread files %s..%s, engine %s..%s)\n", mf.Round(time.Millisecond), me.Round(time.Millisecond),
		me.Seconds()/mf.Seconds(), files[0].Round(time.Millisecond), files[len(files)-1].Round(time.Millisecond),
		engine[0].Round(time.Millisecond), engine[len(engine)-1].Round(time.Millisecond))
	if a, b := rows(outF), rows(outE); a != b {
		ff, fe := filepath.Join(os.TempDir(), "export-bench-report-files.json"), filepath.Join(os.TempDir(), "export-bench-report-engine.json")
		_ = os.WriteFile(ff, outF, 0o644)
		_ = os.WriteFile(fe, outE, 0o644)
		return fmt.Errorf("report --from differs from report over the file (the two reports: %s, %s)", ff, fe)
	}
	fmt.Println("rows equal")
	return nil
}

func timeReport(bin string, args ...string) (time.Duration, []byte, error) {
	cmd := exec.Command(bin, append([]string{"report"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, nil, fmt.Errorf("report %v: %w: %s", args, err, stderr.String())
	}
	return time.Since(start), out.Bytes(), nil
}

// timeQuery times report --from's query to the engine alone: its answer
// read to the end and dropped.
func timeQuery(base string) (time.Duration, int, error) {
	v, err := auditlog.NewVictoriaLogs(base, nil)
	if err != nil {
		return 0, 0, err
	}
	t := time.Now()
	resp, err := http.PostForm(base+"/select/logsql/query", url.Values{"query": {v.LogsQL(auditlog.Query{})}})
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n := 0
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		_, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break
		}
		n++
	}
	return time.Since(t), n, nil
}

func rows(b []byte) string {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "input")
	out, _ := json.Marshal(m)
	return string(out)
}
