package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

// cmdReport prints (and with -md writes) the medians over rounds of each
// proxy and protocol, in the order they first appear.
func cmdReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("in", "", "JSON lines written by bench")
	md := fs.String("md", "", "also write the table here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("h2load report: %w", err)
	}
	defer f.Close()
	var order []string
	runs := map[string][]Result{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("h2load report: %w", err)
		}
		k := r.Name + " " + r.Proto
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("h2load report: %w", err)
	}

	var b strings.Builder
	b.WriteString("| proxy | inside | rounds | one tunnel req/s | µs CPU/req | c tunnels req/s | µs CPU/req | new tunnel req/s | µs CPU/req | one tunnel MB/s | CPU s/GiB | errors ka1 / ka / nc / thr |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, k := range order {
		rs := runs[k]
		name, proto, _ := strings.Cut(k, " ")
		var ka1, ka1c, ka, kac, nc, ncc, thr, thrc []float64
		var e1, ek, en, et int
		for _, r := range rs {
			pick(r.KA1, &ka1, &ka1c, &e1)
			pick(r.KA, &ka, &kac, &ek)
			pick(r.NC, &nc, &ncc, &en)
			if t := r.Thr; t != nil {
				if len(t.MBps) > 0 {
					thr = append(thr, median(t.MBps))
					if t.ProxyCPU >= 0 {
						thrc = append(thrc, t.ProxyCPU/(float64(t.Bytes)*float64(len(t.MBps))/(1<<30)))
					}
				}
				if t.FirstErr != "" {
					et++
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d / %d / %d |\n", name, proto, len(rs),
			f0(ka1), f0(ka1c), f0(ka), f0(kac), f0(nc), f0(ncc), f0(thr), f2(thrc), e1, ek, en, et)
	}
	if len(order) > 0 {
		fmt.Fprintf(&b, "\nMedians over rounds; c = %d. One tunnel: h2 runs c concurrent streams in it, h1 one request at a time. "+
			"µs CPU/req = proxy utime+stime per request. MB/s = 1e6 B/s of one download in one tunnel (median of the round's runs).\n", runs[order[0]][0].Conc)
	}
	fmt.Print(b.String())
	if *md != "" {
		if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("h2load report: %w", err)
		}
	}
	return nil
}

// pick adds a rate test's req/s and CPU per request to the lists, and
// counts a test with errors.
func pick(r *Rate, rps, cpu *[]float64, errs *int) {
	if r == nil {
		return
	}
	if r.Requests > 0 {
		*rps = append(*rps, r.RPS)
		if c := perReqMicros(r); c >= 0 {
			*cpu = append(*cpu, c)
		}
	}
	*errs += r.Errors
}

func f0(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", median(v))
}

func f2(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", median(v))
}
