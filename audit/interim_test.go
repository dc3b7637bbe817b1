package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/record"
)

// decodeAll parses every line of an in-process sink.
func decodeAll(t *testing.T, s string) []record.Record {
	t.Helper()
	var out []record.Record
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var r record.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func interimLogger(clk *fakeClock, w io.Writer, interval time.Duration) *Logger {
	return New(Config{Writers: []io.Writer{w}, Metrics: metrics.New(), Now: clk.Now, AfterFunc: clk.AfterFunc, Interim: interval})
}

func TestInterimRecords(t *testing.T) {
	clk, buf := newFakeClock(), &testutil.SyncBuffer{}
	l := interimLogger(clk, buf, time.Minute)
	start := clk.Now()
	var sent, received atomic.Int64
	base := record.Record{Kind: record.KindConnect, Host: "models.test", Port: 443, Verdict: "allow", Reason: "allowed", Peer: "127.0.0.1:443"}
	id := NewID()
	done := l.Open(id, start, func() record.Record {
		r := base
		r.BytesSent, r.BytesReceived = sent.Load(), received.Load()
		return r
	})

	sent.Store(100)
	clk.Advance(59 * time.Second)
	if got := decodeAll(t, buf.String()); len(got) != 0 {
		t.Fatalf("interim record before the interval: %+v", got)
	}
	clk.Advance(time.Second)
	received.Store(5000)
	clk.Advance(time.Minute)

	cases := []struct {
		name      string
		at        time.Duration
		sent, rcv int64
	}{
		{"first after one interval", time.Minute, 100, 0},
		{"again after two", 2 * time.Minute, 100, 5000},
	}
	got := decodeAll(t, buf.String())
	if len(got) != len(cases) {
		t.Fatalf("%d records, want %d: %s", len(got), len(cases), buf.String())
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := got[i]
			if r.Event != record.EventInterim || r.ID != id || !r.Start.Equal(start) || !r.Time.Equal(start.Add(tc.at)) {
				t.Errorf("event %q id %q start %v time %v", r.Event, r.ID, r.Start, r.Time)
			}
			if r.BytesSent != tc.sent || r.BytesReceived != tc.rcv || r.DurationMS != float64(tc.at.Milliseconds()) {
				t.Errorf("bytes %d/%d duration %v", r.BytesSent, r.BytesReceived, r.DurationMS)
			}
			if r.Host != "models.test" || r.Peer != "127.0.0.1:443" || r.Verdict != "allow" {
				t.Errorf("snapshot fields lost: %+v", r)
			}
		})
	}

	done()
	done() // idempotent
	end := base
	end.ID, end.Start, end.BytesSent, end.BytesReceived = id, start, 100, 5000
	l.Write(&end)
	clk.Advance(10 * time.Minute)
	got = decodeAll(t, buf.String())
	if len(got) != 3 || got[2].Event != record.EventEnd || got[2].ID != id {
		t.Fatalf("after done: want the end record last, have %s", buf.String())
	}
	if n := clk.pending(); n != 0 {
		t.Errorf("%d timers armed with nothing open", n)
	}
}

func TestInterimDisabled(t *testing.T) {
	cases := []struct {
		name     string
		interval time.Duration
		id       string
		snap     func() record.Record
	}{
		{"zero interval", 0, "a", func() record.Record { return record.Record{} }},
		{"no id", time.Minute, "", func() record.Record { return record.Record{} }},
		{"no snapshot", time.Minute, "a", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk, buf := newFakeClock(), &testutil.SyncBuffer{}
			l := interimLogger(clk, buf, tc.interval)
			done := l.Open(tc.id, clk.Now(), tc.snap)
			clk.Advance(time.Hour)
			done()
			if buf.String() != "" || clk.pending() != 0 {
				t.Errorf("records %q, timers %d", buf.String(), clk.pending())
			}
		})
	}
}

// TestInterimManyOpen: 10,000 open requests share one timer; each gets
// exactly one record per interval, and none once done.
func TestInterimManyOpen(t *testing.T) {
	clk := newFakeClock()
	var count atomic.Int64
	seen := map[string]int{}
	var mu sync.Mutex
	l := New(Config{Metrics: metrics.New(), Now: clk.Now, AfterFunc: clk.AfterFunc, Interim: time.Minute,
		OnRecord: func(r *record.Record) {
			count.Add(1)
			mu.Lock()
			seen[r.ID]++
			mu.Unlock()
		}})
	const n = 10000
	start := clk.Now()
	dones := make([]func(), n)
	for i := range n {
		// Starts spread over the first second, in no particular order.
		at := start.Add(time.Duration((i*7919)%1000) * time.Millisecond)
		dones[i] = l.Open(fmt.Sprintf("id-%d", i), at, func() record.Record { return record.Record{Kind: record.KindConnect, BytesSent: int64(i)} })
	}
	if p := clk.pending(); p != 1 {
		t.Fatalf("%d timers for %d open requests, want 1", p, n)
	}
	clk.Advance(time.Minute + time.Second)
	if got := count.Load(); got != n {
		t.Fatalf("%d interim records after one interval, want %d", got, n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("id %s: %d records", id, k)
		}
	}
	for i, done := range dones {
		if i%2 == 0 {
			done()
		}
	}
	clk.Advance(time.Minute)
	if got := count.Load(); got != n+n/2 {
		t.Fatalf("%d records after half were done, want %d", got, n+n/2)
	}
	for _, done := range dones {
		done()
	}
	clk.Advance(time.Hour)
	if got := count.Load(); got != n+n/2 {
		t.Fatalf("records after every request was done: %d", got-n-n/2)
	}
}

// TestInterimNeverAfterDone races the interim timer against done and the
// end record many times: the end record must be the last of its id every
// time (done waits for an interim record being written).
func TestInterimNeverAfterDone(t *testing.T) {
	for round := range 300 {
		clk, buf := newFakeClock(), &testutil.SyncBuffer{}
		l := interimLogger(clk, buf, time.Second)
		id := fmt.Sprintf("r%d", round)
		start := clk.Now()
		done := l.Open(id, start, func() record.Record { return record.Record{Kind: record.KindConnect, Host: "x.test"} })
		var wg sync.WaitGroup
		gate := make(chan struct{})
		wg.Go(func() {
			<-gate
			clk.Advance(time.Second)
		})
		wg.Go(func() {
			<-gate
			done()
			l.Write(&record.Record{ID: id, Start: start, Kind: record.KindConnect, Host: "x.test"})
		})
		close(gate)
		wg.Wait()
		clk.Advance(time.Minute)
		got := decodeAll(t, buf.String())
		if len(got) == 0 || got[len(got)-1].Event != record.EventEnd {
			t.Fatalf("round %d: records %s", round, buf.String())
		}
		if len(got) > 2 {
			t.Fatalf("round %d: %d records", round, len(got))
		}
	}
}

func TestInterimStopsAtClose(t *testing.T) {
	clk, buf := newFakeClock(), &testutil.SyncBuffer{}
	l := interimLogger(clk, buf, time.Second)
	l.Open("a", clk.Now(), func() record.Record { return record.Record{Kind: record.KindConnect} })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Open("b", clk.Now(), func() record.Record { return record.Record{Kind: record.KindConnect} })
	clk.Advance(time.Minute)
	if buf.String() != "" {
		t.Errorf("interim records after Close: %s", buf.String())
	}
}

func TestOnRecordSeesEveryRecord(t *testing.T) {
	clk, buf := newFakeClock(), &testutil.SyncBuffer{}
	var events []string
	l := New(Config{Writers: []io.Writer{buf}, Metrics: metrics.New(), Now: clk.Now, AfterFunc: clk.AfterFunc,
		Interim: time.Second, OnRecord: func(r *record.Record) { events = append(events, r.Event+":"+r.Reason) }})
	done := l.Open("a", clk.Now(), func() record.Record { return record.Record{Kind: record.KindConnect, Reason: "allowed"} })
	clk.Advance(time.Second)
	done()
	l.Write(&record.Record{ID: "a", Kind: record.KindConnect, Reason: "allowed"})
	l.Write(&record.Record{Kind: record.KindConnect, Reason: "not-allowlisted"})
	want := "interim:allowed end:allowed end:not-allowlisted"
	if got := strings.Join(events, " "); got != want {
		t.Errorf("OnRecord saw %q, want %q", got, want)
	}
}
