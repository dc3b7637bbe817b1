package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
)

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
