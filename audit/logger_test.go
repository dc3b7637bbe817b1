package audit

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

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

func tempFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readLines(t *testing.T, f *os.File) []string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		t.Fatalf("file ends inside a record: %q", b)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func hostOf(t *testing.T, line string) string {
	t.Helper()
	var r record.Record
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return r.Host
}

func TestLoggerBatchesFileWriters(t *testing.T) {
	a, b := tempFile(t, "a"), tempFile(t, "b")
	m := metrics.New()
	// An hour: nothing but Flush, a full buffer or Close writes.
	l := New(Config{Writers: []io.Writer{a, b}, Metrics: m, FlushInterval: time.Hour})
	for i := range 10 {
		l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("h%d.test", i)})
	}
	if lines := readLines(t, a); len(lines) != 0 {
		t.Fatalf("records written before Flush: %q", lines)
	}
	if got := testCounter(m.AuditWritten); got != 0 {
		t.Errorf("written counter %v before Flush", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	la, lb := readLines(t, a), readLines(t, b)
	if strings.Join(la, "\n") != strings.Join(lb, "\n") {
		t.Fatal("writers got different bytes")
	}
	if len(la) != 10 {
		t.Fatalf("%d lines, want 10", len(la))
	}
	for i, line := range la {
		if h := hostOf(t, line); h != fmt.Sprintf("h%d.test", i) {
			t.Errorf("line %d host %q", i, h)
		}
	}
	if got := testCounter(m.AuditWritten); got != 10 {
		t.Errorf("written counter %v, want 10", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLoggerFlushesFullBuffer: a full batch is written at once, not after
// FlushInterval (an hour here). The sink's goroutine writes it; the
// deadline only turns a hang into a failure.
func TestLoggerFlushesFullBuffer(t *testing.T) {
	f := tempFile(t, "a")
	// A record is about 280 bytes (two timestamps whose length varies with
	// their trailing zeros): 4 stay well below the batch size, 10 pass it.
	l := New(Config{Writers: []io.Writer{f}, Metrics: metrics.New(), FlushInterval: time.Hour, BufferSize: 2000})
	defer l.Close()
	for i := range 4 { // not a full batch yet
		l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("h%d.test", i)})
	}
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Fatalf("%d bytes written before the batch was full", fi.Size())
	}
	for i := 4; i < 10; i++ {
		l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("h%d.test", i)})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, _ := f.Stat()
		if fi.Size() >= 2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a full batch was not written (%d bytes in the file)", fi.Size())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoggerFlushesWhenIdle waits for the timer; the deadline only turns a
// hang into a failure.
func TestLoggerFlushesWhenIdle(t *testing.T) {
	f := tempFile(t, "a")
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{f}, Metrics: m, FlushInterval: time.Millisecond})
	defer l.Close()
	for round := range 3 { // the timer re-arms after each flush
		l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("r%d.test", round)})
		deadline := time.Now().Add(10 * time.Second)
		for len(readLines(t, f)) != round+1 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: record not flushed by the timer", round)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func TestLoggerClose(t *testing.T) {
	f := tempFile(t, "a")
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{f}, Metrics: m, FlushInterval: time.Hour})
	l.Write(&record.Record{Kind: record.KindDNS, Host: "before.test"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, f); len(lines) != 1 || hostOf(t, lines[0]) != "before.test" {
		t.Fatalf("after Close: %q", lines)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l.Write(&record.Record{Kind: record.KindDNS, Host: "after.test"}) // written at once
	if lines := readLines(t, f); len(lines) != 2 || hostOf(t, lines[1]) != "after.test" {
		t.Fatalf("Write after Close: %q", lines)
	}
	if got := testCounter(m.AuditWritten); got != 2 {
		t.Errorf("written counter %v, want 2", got)
	}
}

func TestLoggerUnbatched(t *testing.T) {
	f, buf := tempFile(t, "a"), &bytes.Buffer{}
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{f, buf}, Metrics: m, FlushInterval: -1})
	l.Write(&record.Record{Kind: record.KindDNS, Host: "now.test"})
	if lines := readLines(t, f); len(lines) != 1 {
		t.Fatalf("record not written by Write: %q", lines)
	}
	if buf.Len() == 0 {
		t.Fatal("in-process writer got nothing")
	}
	if got := testCounter(m.AuditWritten); got != 1 {
		t.Errorf("written counter %v", got)
	}
}

// TestLoggerInProcessBesideFile: an in-process writer gets each record
// before Write returns, while the file beside it still gets batches.
func TestLoggerInProcessBesideFile(t *testing.T) {
	f, buf := tempFile(t, "a"), &bytes.Buffer{}
	l := New(Config{Writers: []io.Writer{f, buf}, Metrics: metrics.New(), FlushInterval: time.Hour})
	l.Write(&record.Record{Kind: record.KindDNS, Host: "now.test"})
	if buf.Len() == 0 {
		t.Fatal("in-process writer got nothing from Write")
	}
	if lines := readLines(t, f); len(lines) != 0 {
		t.Fatalf("file written before its batch was due: %q", lines)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, f); len(lines) != 1 || hostOf(t, lines[0]) != "now.test" {
		t.Fatalf("file after Close: %q", lines)
	}
}

// TestLoggerFailingSinkKeepsRecords: a sink whose writes fail (a read-only
// descriptor: EBADF) keeps its records and retries; the sink beside it is
// not held up; Flush reports the error; Close gives up after WaitTimeout
// and counts what that sink never got.
func TestLoggerFailingSinkKeepsRecords(t *testing.T) {
	good := tempFile(t, "good")
	ro, err := os.Open(good.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{good, ro}, Metrics: m, FlushInterval: time.Hour,
		RetryBackoff: time.Millisecond, WaitTimeout: 100 * time.Millisecond})
	for range 3 {
		l.Write(&record.Record{Kind: record.KindDNS})
	}
	if err := l.Flush(); err == nil || !strings.HasPrefix(err.Error(), "audit: ") {
		t.Errorf("Flush error %v, want the write error", err)
	}
	if lines := readLines(t, good); len(lines) != 3 {
		t.Errorf("good sink has %d records, want 3", len(lines))
	}
	err = l.Close()
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), ro.Name()) {
		t.Errorf("Close error %v, want ErrTimeout naming the failing file", err)
	}
	if f, d := testCounter(m.AuditFailed), testCounter(m.AuditDropped); f < 1 || d != 3 {
		t.Errorf("write errors %v dropped %v, want ≥1 and 3", f, d)
	}
	if l.Available() {
		t.Error("Available with a sink that never wrote (closed mode)")
	}
}

func TestLoggerEncodeFailureCounted(t *testing.T) {
	f := tempFile(t, "a")
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{f}, Metrics: m})
	l.Write(&record.Record{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testCounter(m.AuditFailed); got != 1 {
		t.Errorf("failed counter %v, want 1", got)
	}
	if lines := readLines(t, f); len(lines) != 0 {
		t.Errorf("unencodable record written: %q", lines)
	}
}

// TestLoggerBackpressure writes into a pipe nobody reads at first: Write
// must neither block nor drop while the records fit in the buffer, and
// every record must arrive in order once the reader drains the pipe.
func TestLoggerBackpressure(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{pw}, Metrics: m, FlushInterval: time.Hour, BufferSize: 4096})
	const n = 2000 // ~400 KiB: several times the pipe's 64 KiB
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("h%d.test", i), Error: strings.Repeat("x", 100)})
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		pw.Close()
	})
	sc := bufio.NewScanner(pr)
	i := 0
	for sc.Scan() {
		if h := hostOf(t, sc.Text()); h != fmt.Sprintf("h%d.test", i) {
			t.Fatalf("record %d is %q", i, h)
		}
		i++
	}
	wg.Wait()
	if i != n {
		t.Fatalf("%d records, want %d", i, n)
	}
	if got := testCounter(m.AuditWritten); got != n {
		t.Errorf("written counter %v, want %d", got, n)
	}
}

func TestLoggerConcurrentBatched(t *testing.T) {
	f := tempFile(t, "a")
	m := metrics.New()
	l := New(Config{Writers: []io.Writer{f}, Metrics: m, FlushInterval: time.Millisecond, BufferSize: 2048})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l.Write(&record.Record{Kind: record.KindDNS, Host: fmt.Sprintf("g%d-%d.test", g, i)})
				if i%50 == 0 {
					_ = l.Flush()
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, f)
	seen := map[string]bool{}
	for _, line := range lines {
		seen[hostOf(t, line)] = true
	}
	if len(lines) != 1600 || len(seen) != 1600 {
		t.Fatalf("%d lines, %d distinct, want 1600", len(lines), len(seen))
	}
	if got := testCounter(m.AuditWritten); got != 1600 {
		t.Errorf("written counter %v", got)
	}
}

func TestNewIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := NewID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}
