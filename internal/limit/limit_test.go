package limit

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

func TestConns(t *testing.T) {
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	l := NewConns(2)
	r1, r2 := l.Acquire(a), l.Acquire(a)
	if r1 == nil || r2 == nil {
		t.Fatal("under the cap: refused")
	}
	if l.Acquire(a) != nil {
		t.Fatal("over the cap: admitted")
	}
	if l.Acquire(b) == nil {
		t.Fatal("another client shares the cap")
	}
	r1()
	r1() // twice is once
	if got := l.Open(a); got != 1 {
		t.Fatalf("open %d after one release, want 1", got)
	}
	if l.Acquire(a) == nil {
		t.Fatal("a released slot is not reusable")
	}
	if NewConns(0).Acquire(a) == nil {
		t.Fatal("no cap refused")
	}
}

func TestRate(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	r := NewRate(10, 5, clock)
	for i := range 5 {
		if !r.Allow(a) {
			t.Fatalf("burst request %d refused", i)
		}
	}
	if r.Allow(a) {
		t.Fatal("over the burst: admitted")
	}
	if !r.Allow(b) {
		t.Fatal("another client shares the bucket")
	}
	now = now.Add(100 * time.Millisecond) // one token at 10/s
	if !r.Allow(a) || r.Allow(a) {
		t.Fatal("refill: want exactly one token after 100ms")
	}
	now = now.Add(time.Hour)
	r.Allow(b) // sweeps
	n := 0
	r.buckets.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d buckets after an hour of quiet, want 1 (the new one)", n)
	}
	var none *Rate
	if !none.Allow(a) || !NewRate(0, 0, clock).Allow(a) {
		t.Fatal("no limit refused")
	}
}

func TestSummary(t *testing.T) {
	var mu sync.Mutex
	got := map[Key]int64{}
	done := make(chan struct{}, 4)
	s := NewSummary(SummaryConfig{Interval: time.Hour, Emit: func(k Key, n int64, _ time.Time) {
		mu.Lock()
		got[k] += n
		mu.Unlock()
		done <- struct{}{}
	}})
	a := netip.MustParseAddr("127.0.0.2")
	ka := Key{Src: a, Kind: "dns", Reason: "rate-limited"}
	kb := Key{Src: a, Kind: "connect", Reason: "rate-limited"}
	for range 1000 {
		s.Add(ka)
	}
	s.Add(kb)
	s.Close() // the hour never passes: Close emits
	if got[ka] != 1000 || got[kb] != 1 || len(got) != 2 {
		t.Fatalf("summaries %v", got)
	}
}

func TestSummaryTimer(t *testing.T) {
	ch := make(chan int64, 1)
	s := NewSummary(SummaryConfig{Interval: time.Millisecond, Emit: func(_ Key, n int64, _ time.Time) { ch <- n }})
	s.Add(Key{Kind: "dns"})
	s.Add(Key{Kind: "dns"})
	if n := <-ch; n != 2 && n != 1 {
		t.Fatalf("count %d", n)
	}
}
