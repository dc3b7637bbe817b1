package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The image runs egressd with GODEBUG=schedtrace=<the largest interval>
// (Dockerfile, README "Decisions"): the benchmarks must run it the same
// way, and the value must be one the runtime takes (an int32 number of
// milliseconds: a larger one is ignored without a word).
func TestImageGODEBUG(t *testing.T) {
	root := filepath.Join("..", "..")
	docker, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var value string
	for line := range strings.Lines(string(docker)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV GODEBUG="); ok {
			value = v
		}
	}
	if value == "" {
		t.Fatal("Dockerfile: no ENV GODEBUG=")
	}
	ms, ok := strings.CutPrefix(value, "schedtrace=")
	if !ok {
		t.Fatalf("Dockerfile: GODEBUG=%s, want schedtrace=N only", value)
	}
	if n, err := strconv.ParseInt(ms, 10, 32); err != nil || n <= 0 {
		t.Fatalf("Dockerfile: schedtrace=%s is not a positive int32: the runtime would ignore it", ms)
	}
	for path, want := range map[string]string{
		"bench/peer/run.sh":  "GODEBUG=" + value,
		"bench/dns/run.sh":   "godebug=" + value,
		"bench/soak/main.go": `imageGODEBUG = "` + value + `"`,
	} {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not run egressd with %s (the image's GODEBUG)", path, want)
		}
	}
}

// The runtime still knows schedtrace: with a 1 ms interval a process
// prints scheduler lines. (What the large interval saves is measured by
// bench/peer, not here.)
func TestSchedtraceKnown(t *testing.T) {
	if os.Getenv("EGRESSD_TEST_SCHEDTRACE") == "1" {
		time.Sleep(50 * time.Millisecond)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSchedtraceKnown$")
	cmd.Env = append(os.Environ(), "EGRESSD_TEST_SCHEDTRACE=1", "GODEBUG=schedtrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !bytes.Contains(out, []byte("SCHED ")) {
		t.Fatalf("GODEBUG=schedtrace=1 printed no scheduler trace: the runtime no longer knows the setting the image relies on\n%s", out)
	}
}
