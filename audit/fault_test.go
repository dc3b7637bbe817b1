package audit

// Audit sink faults on real file systems and pipes: a tmpfs that fills, a
// directory remounted read-only, a stdout reader that stops reading. The
// mounts need root (CAP_SYS_ADMIN), which CI and the dev container have.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// mountTmpfs mounts a tmpfs of the given size (mount(8)'s size=) on a
// fresh directory, unmounted at the end of the test.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount tmpfs on %s (the test needs root): %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fillDisk fills the file system of dir with one file, then frees `leave`
// bytes of it, and returns a function that frees everything.
func fillDisk(t *testing.T, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	var size int64
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if errors.Is(err, unix.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size - leave); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
	}
}

// sinkStates records OnSinkState calls.
type sinkStates chan bool

func (c sinkStates) callback(ok bool, _ error) { c <- ok }

// wait waits for the state; the deadline only turns a hang into a failure.
func (c sinkStates) wait(t *testing.T, want bool) {
	t.Helper()
	select {
	case got := <-c:
		if got != want {
			t.Fatalf("sink state %v, want %v", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("sink state never turned %v", want)
	}
}

func faultConfig(w io.Writer, m *metrics.Metrics, states sinkStates) Config {
	return Config{Writers: []io.Writer{w}, Metrics: m, FlushInterval: time.Millisecond,
		BufferLimit: 64 << 10, BufferSize: 1 << 10, RetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond,
		OnSinkState: states.callback}
}

func faultRecord(i int) *record.Record {
	return &record.Record{ID: fmt.Sprintf("r%05d", i), Kind: record.KindConnect, Host: "models.test", Port: 443,
		Verdict: "allow", Reason: "allowed", Error: strings.Repeat("e", 150)}
}

func gauge(m *metrics.Metrics) float64 { return testGauge(m.AuditAvailable) }

// TestDiskFullClosed: the audit file's tmpfs fills (with room for part of
// a record). Closed mode: the logger turns unavailable, keeps every record
// it took, including those of requests still running and one refusal, and
// once space is freed writes them all, whole and once.
func TestDiskFullClosed(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	f, err := OpenFile(FileConfig{Path: filepath.Join(dir, "audit.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	free := fillDisk(t, dir, 4096)
	m, states := metrics.New(), make(sinkStates, 4)
	l := New(faultConfig(f, m, states))

	n := 0
	for ; n < 30; n++ { // ~9 KB: more than the 4 KiB left, less than the backlog threshold
		l.Write(faultRecord(n))
	}
	states.wait(t, false)
	if l.Available() || gauge(m) != 0 {
		t.Fatalf("Available %v, gauge %v on a full disk", l.Available(), gauge(m))
	}
	// The disk took part of a record: the rest must follow it, not a
	// second copy.
	if b, _ := os.ReadFile(f.Name()); len(b) == 0 || b[len(b)-1] == '\n' {
		t.Fatalf("the full disk took %d bytes ending %q: no record was cut", len(b), b[max(0, len(b)-1):])
	}
	// Requests admitted before still end, and a new one is refused.
	for end := n + 20; n < end; n++ {
		l.Write(faultRecord(n))
	}
	refusal := faultRecord(n)
	refusal.Verdict, refusal.Reason = "deny", string(policy.ReasonAuditUnavailable)
	l.Write(refusal)
	n++
	if d := testCounter(m.AuditDropped); d != 0 {
		t.Fatalf("dropped %v records with room in the buffer", d)
	}

	free()
	states.wait(t, true)
	if !l.Available() || gauge(m) != 1 {
		t.Fatalf("Available %v, gauge %v after space was freed", l.Available(), gauge(m))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ids, _ := idsInDir(t, dir)
	for i := range n {
		if c := ids[fmt.Sprintf("r%05d", i)]; c != 1 {
			t.Errorf("record %d written %d times", i, c)
		}
	}
	if testCounter(m.AuditFailed) < 1 {
		t.Error("no write error counted")
	}
}

// TestDiskFullOpen: open mode keeps serving while the disk is full; what
// does not fit in the buffer is dropped, counted and recorded as a gap (one
// gap record, written once the sink recovers), and everything else
// arrives once space is freed.
func TestDiskFullOpen(t *testing.T) {
	dir := mountTmpfs(t, "256k")
	f, err := OpenFile(FileConfig{Path: filepath.Join(dir, "audit.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	free := fillDisk(t, dir, 4096)
	m, states := metrics.New(), make(sinkStates, 4)
	cfg := faultConfig(f, m, states)
	cfg.Failure = FailOpen
	cfg.BufferLimit = 16 << 10
	l := New(cfg)

	const n = 300 // ~90 KB: far more than the disk and the buffer hold
	for i := range n {
		l.Write(faultRecord(i))
		if !l.Available() {
			t.Fatalf("open mode refused at record %d", i)
		}
	}
	states.wait(t, false)
	if gauge(m) != 0 {
		t.Errorf("gauge %v while the disk is full", gauge(m))
	}
	dropped := testCounter(m.AuditDropped)
	if dropped == 0 {
		t.Fatal("nothing dropped: the buffer held everything")
	}
	free()
	states.wait(t, true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ids, _ := idsInDir(t, dir)
	if ids[""] != 1 { // the gap record has no id
		t.Errorf("%d gap records, want 1", ids[""])
	}
	delete(ids, "")
	for id, c := range ids {
		if c != 1 {
			t.Errorf("record %s written %d times", id, c)
		}
	}
	if g := gapRecords(t, f.Name()); len(g) != 1 || g[0].Records != int64(dropped) || g[0].Sink != f.Name() || g[0].Cause == "" {
		t.Errorf("gap records %+v, want one of %v records dropped by %s, with its cause", g, dropped, f.Name())
	}
	if got := len(ids) + int(dropped); got != n {
		t.Errorf("%d written + %v dropped, want %d", len(ids), dropped, n)
	}
}

// TestUnwritableFile: logrotate renamed the file but the directory is now
// read-only, so the reopen fails; records wait, the logger is unavailable,
// and once the directory is writable again every record reaches the file.
func TestUnwritableFile(t *testing.T) {
	sub := filepath.Join(mountTmpfs(t, "1m"), "logs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "audit.jsonl")
	f, err := OpenFile(FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, states := metrics.New(), make(sinkStates, 4)
	l := New(faultConfig(f, m, states))
	l.Write(faultRecord(0))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}

	// A read-only bind mount of the directory on itself: the file open
	// before stays writable, a new open fails with EROFS.
	if err := unix.Mount(sub, sub, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := unix.Mount("", sub, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err == nil || !errors.Is(err, unix.EROFS) {
		t.Fatalf("rename on the read-only mount: %v", err)
	}
	if err := l.Reopen(); !errors.Is(err, unix.EROFS) {
		t.Fatalf("Reopen error %v, want EROFS", err)
	}
	for i := 1; i <= 10; i++ {
		l.Write(faultRecord(i))
	}
	states.wait(t, false)
	if l.Available() {
		t.Fatal("Available while no record can be written")
	}
	if err := unix.Mount("", sub, "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	states.wait(t, true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ids, _ := idsInDir(t, sub)
	if len(ids) != 11 {
		t.Errorf("%d records in the file, want 11", len(ids))
	}
	for id, c := range ids {
		if c != 1 {
			t.Errorf("record %s written %d times", id, c)
		}
	}
}

// smallPipe returns a pipe whose buffer is one page, so that a stopped
// reader blocks the writer after 4 KiB.
func smallPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	return pr, pw
}

// TestStdoutBackpressure: stdout is a pipe whose reader stops reading.
// Write never blocks; the logger turns unavailable once the backlog grows;
// when the reader resumes, every record arrives, in order.
func TestStdoutBackpressure(t *testing.T) {
	pr, pw := smallPipe(t)
	m, states := metrics.New(), make(sinkStates, 4)
	l := New(faultConfig(pw, m, states))

	n := 0
	for l.Available() { // returns: Write never blocks on the stalled pipe
		if n > 1000 {
			t.Fatal("still available after 1,000 records into a stalled pipe")
		}
		l.Write(faultRecord(n))
		n++
	}
	states.wait(t, false)
	for end := n + 20; n < end; n++ { // requests still running end
		l.Write(faultRecord(n))
	}
	if d := testCounter(m.AuditDropped); d != 0 {
		t.Fatalf("dropped %v", d)
	}

	var wg sync.WaitGroup
	got := 0
	wg.Go(func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if want := fmt.Sprintf("r%05d", got); hostID(t, sc.Text()) != want {
				t.Errorf("record %d is %q", got, sc.Text())
				return
			}
			got++
		}
	})
	states.wait(t, true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	wg.Wait()
	if got != n {
		t.Errorf("%d records read, want %d", got, n)
	}
}

// TestStalledWrite: a write that hangs (a reader that stopped, an NFS
// server gone) makes the sink unavailable after StallTimeout even when the
// backlog is small.
func TestStalledWrite(t *testing.T) {
	pr, pw := smallPipe(t)
	if _, err := pw.Write([]byte(strings.Repeat("x", 4095) + "\n")); err != nil { // fill the pipe
		t.Fatal(err)
	}
	clk, m, states := newFakeClock(), metrics.New(), make(sinkStates, 4)
	cfg := faultConfig(pw, m, states)
	cfg.Now, cfg.AfterFunc, cfg.StallTimeout = clk.Now, clk.AfterFunc, 5*time.Second
	l := New(cfg)
	l.Write(faultRecord(0))
	clk.Advance(cfg.FlushInterval) // the batch falls due; the write hangs
	clk.waitArmed(cfg.StallTimeout)
	if !l.Available() {
		t.Fatal("unavailable before the stall timeout")
	}
	clk.Advance(cfg.StallTimeout)
	if l.Available() {
		t.Fatal("available while a write hangs")
	}
	states.wait(t, false)

	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !sc.Scan() || hostID(t, sc.Text()) != "r00000" {
		t.Fatalf("record after the stall: %q %v", sc.Text(), sc.Err())
	}
	states.wait(t, true)
}

// hostID returns a record line's id.
func hostID(t *testing.T, line string) string {
	t.Helper()
	var r record.Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return r.ID
}

// TestReopenAfterCutRecord: the full disk cut a record, then logrotate
// renames the file and sends SIGHUP. With space freed first, the record is
// finished in the old file; with the disk still full, it goes whole to the
// new file and the old one keeps a fragment. Either way every record is
// whole in exactly one file.
func TestReopenAfterCutRecord(t *testing.T) {
	for _, freedFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "space freed first", false: "disk still full"}[freedFirst], func(t *testing.T) {
			dir := mountTmpfs(t, "256k")
			path := filepath.Join(dir, "audit.jsonl")
			f, err := OpenFile(FileConfig{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			free := fillDisk(t, dir, 4096)
			clk, m, states := newFakeClock(), metrics.New(), make(sinkStates, 8)
			cfg := faultConfig(f, m, states)
			const backoff = 7 * time.Millisecond
			cfg.Now, cfg.AfterFunc = clk.Now, clk.AfterFunc
			cfg.FlushInterval, cfg.RetryBackoff, cfg.MaxRetryBackoff, cfg.StallTimeout = time.Hour, backoff, backoff, -1
			l := New(cfg)
			const n = 30
			for i := range n {
				l.Write(faultRecord(i))
			}
			clk.waitArmed(backoff) // the write failed: its retry waits
			if b, _ := os.ReadFile(path); len(b) == 0 || b[len(b)-1] == '\n' {
				t.Fatalf("the full disk took %d bytes: no record was cut", len(b))
			}
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if freedFirst {
				free()
			} else {
				clk.Advance(time.Millisecond) // tells the next retry timer from the first
			}
			if err := l.Reopen(); err != nil {
				t.Fatal(err)
			}
			if !freedFirst {
				clk.waitArmed(backoff) // the new file is full too
				free()
				clk.Advance(backoff)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			old, err := os.ReadFile(path + ".1")
			if err != nil {
				t.Fatal(err)
			}
			if freedFirst != (old[len(old)-1] == '\n') {
				t.Fatalf("old file ends %q", old[len(old)-20:])
			}
			if !freedFirst { // drop the fragment; its record is whole in the new file
				old = old[:bytes.LastIndexByte(old, '\n')+1]
				if err := os.WriteFile(path+".1", old, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			ids, files := idsInDir(t, dir)
			if files != 2 || len(ids) != n {
				t.Fatalf("%d files, %d records, want 2 and %d", files, len(ids), n)
			}
			for id, c := range ids {
				if c != 1 {
					t.Errorf("record %s in %d lines", id, c)
				}
			}
		})
	}
}
