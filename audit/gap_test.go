package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/record"
)

// gapRecords returns the gap records of the file at path.
func gapRecords(t *testing.T, path string) []gapRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []gapRecord
	for line := range bytes.Lines(b) {
		var g gapRecord
		if err := json.Unmarshal(line, &g); err == nil && g.Kind == record.KindGap {
			out = append(out, g)
		}
	}
	return out
}

// switchWriter is a sink (a FileWriter) that fails while down is set, as
// the export spool does when full, and keeps what it took.
type switchWriter struct {
	mu   sync.Mutex
	down bool
	buf  bytes.Buffer
}

var errDown = errors.New("spool full (test)")

func (w *switchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		return 0, errDown
	}
	return w.buf.Write(p)
}

func (w *switchWriter) Reopen() error { return nil }
func (w *switchWriter) Name() string  { return "switch" }

func (w *switchWriter) set(down bool) {
	w.mu.Lock()
	w.down = down
	w.mu.Unlock()
}

func (w *switchWriter) lines() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.SplitAfter(bytes.Clone(w.buf.Bytes()), []byte{'\n'})
}

// TestGapRecordSigned: open mode, one sink down (an export spool that is
// full) and one up (the audit file). The records the down sink drops are
// counted, and once it takes records again one signed gap record, in both
// sinks, names how many, since when, why, and their seq range; verify over
// the down sink's copy reports exactly that range missing, named by the
// gap, and over the file's copy nothing.
func TestGapRecordSigned(t *testing.T) {
	ev, verifier := testLog(t, "gap-test")
	file := tempFile(t, "audit.jsonl")
	down := &switchWriter{down: true}
	m, states := metrics.New(), make(sinkStates, 8)
	cfg := faultConfig(file, m, states)
	cfg.Writers = []io.Writer{file, down}
	cfg.Failure, cfg.BufferLimit, cfg.Evidence = FailOpen, 16<<10, ev
	l := New(cfg)

	const n = 200 // ~60 KB: far more than the 16 KiB buffer
	for i := range n {
		l.Write(faultRecord(i))
		if i%20 == 19 {
			_ = l.Flush() // the file keeps up: only the down sink drops
		}
	}
	states.wait(t, false)
	dropped := testCounter(m.AuditDropped)
	if dropped == 0 {
		t.Fatal("nothing dropped: the buffer held everything")
	}
	down.set(false)
	states.wait(t, true)
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains(bytes.Join(down.lines(), nil), []byte(`"kind":"gap"`)) {
		if time.Now().After(deadline) {
			t.Fatal("no gap record reached the sink once it recovered")
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	g := gapRecords(t, file.Name())
	if len(g) != 1 || g[0].Records != int64(dropped) || g[0].Sink != "switch" || g[0].Cause != errDown.Error() ||
		g[0].FirstSeq == nil || g[0].LastSeq == nil || g[0].Since.IsZero() {
		t.Fatalf("gap records in the file: %+v, want one of %v records dropped by switch", g, dropped)
	}
	first, last := *g[0].FirstSeq, *g[0].LastSeq
	if last-first+1 != int64(dropped) {
		t.Errorf("gap seq %d-%d for %v dropped records (nothing else was written then)", first, last, dropped)
	}

	verify := func(lines [][]byte) string {
		v := evidence.NewVerifier(verifier)
		for _, l := range lines {
			v.Line(bytes.TrimSuffix(l, []byte{'\n'}))
		}
		var out strings.Builder
		for _, f := range v.Finish().Findings {
			out.WriteString(f.String() + "\n")
		}
		return out.String()
	}
	b, _ := os.ReadFile(file.Name())
	if got := verify(bytes.SplitAfter(b, []byte{'\n'})); got != "" {
		t.Errorf("verify over the file: %s", got)
	}
	got := verify(down.lines())
	want := "missing log=" + ev.ID() + " seq=" + itoa(first) + "-" + itoa(last) + " " + itoa(last-first+1) + " records absent (gap recorded: switch dropped " +
		itoa(int64(dropped)) + " records, seq " + itoa(first) + "-" + itoa(last) + ": " + errDown.Error() + ")\n"
	if got != want {
		t.Errorf("verify over the sink that dropped:\n got %q\nwant %q", got, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
