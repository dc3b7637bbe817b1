package gopool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReuse: work handed out one at a time runs on the one parked
// goroutine; every function runs exactly once.
func TestReuse(t *testing.T) {
	p := New(4, time.Minute)
	defer p.Stop()
	var ran atomic.Int32
	for range 100 {
		done := make(chan struct{})
		p.Go(func() { ran.Add(1); close(done) })
		<-done
		waitParked(t, p, 1)
	}
	if ran.Load() != 100 {
		t.Fatalf("ran %d, want 100", ran.Load())
	}
	if n := p.Parked(); n != 1 {
		t.Fatalf("%d parked after serial work, want 1", n)
	}
}

// TestBounds: at most Max park; a parked goroutine ends after IdleFor;
// Stop ends the rest and later work still runs.
func TestBounds(t *testing.T) {
	p := New(3, 100*time.Millisecond)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 10 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	waitParked(t, p, 3)
	time.Sleep(300 * time.Millisecond)
	if n := p.Parked(); n != 0 {
		t.Fatalf("%d still parked after IdleFor", n)
	}

	base := runtime.NumGoroutine()
	for range 3 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
	}
	waitParked(t, p, 1)
	p.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d after Stop, want %d", runtime.NumGoroutine(), base)
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	if n := p.Parked(); n != 0 {
		t.Fatalf("%d parked after Stop", n)
	}
}

func waitParked(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Parked() != n {
		if time.Now().After(deadline) {
			t.Fatalf("parked %d, want %d", p.Parked(), n)
		}
		runtime.Gosched()
	}
}

// BenchmarkGo: handing work to a parked goroutine against starting one
// whose stack grows (the work uses 16 KiB of stack, as a request's calls do).
func BenchmarkGo(b *testing.B) {
	work := func(done chan struct{}) func() {
		return func() { deep(32); done <- struct{}{} }
	}
	b.Run("go", func(b *testing.B) {
		done := make(chan struct{})
		for range b.N {
			go work(done)()
			<-done
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := New(4, time.Minute)
		defer p.Stop()
		done := make(chan struct{})
		for range b.N {
			p.Go(work(done))
			<-done
		}
	})
}

//go:noinline
func deep(n int) byte {
	var pad [512]byte
	if n == 0 {
		return pad[0]
	}
	pad[n] = byte(n)
	return deep(n-1) + pad[n]
}
