package main

import (
	"os"
	"strconv"
	"strings"
)

// procCPUSeconds is the utime+stime of the processes, in seconds (clock
// ticks of 1/100 s, as Linux reports them in /proc/PID/stat).
func procCPUSeconds(pids []int) float64 {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')') // the command name may hold spaces
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 { // fields 14 and 15 of stat: the 12th and 13th after ')'
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return float64(ticks) / 100
}

// perReqMicros is the proxy's CPU per request of a rate test, in µs (-1:
// unknown).
func perReqMicros(r *Rate) float64 {
	if r == nil || r.ProxyCPU < 0 || r.Requests == 0 {
		return -1
	}
	return r.ProxyCPU * 1e6 / float64(r.Requests)
}
