package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// hurryKey holds, in the context notifyStop returns, the context that ends
// at the second stop signal.
type hurryKey struct{}

// notifyStop returns a context that ends at the first SIGTERM or SIGINT and
// carries a second one (hurryOf) that ends at the next. `egressd run` turns
// unready at the first and serves on for --lameduck; the second skips the
// rest of the lameduck and begins the drain at once (a person pressing
// Ctrl-C twice; the kubelet sends one SIGTERM, then SIGKILL at the end of
// the grace period). Later signals are ignored: the drain is bounded by
// --drain-timeout and writes every record. stop releases the signals.
func notifyStop(parent context.Context) (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	first, cancelFirst := context.WithCancel(parent)
	second, cancelSecond := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		for _, cancel := range []context.CancelFunc{cancelFirst, cancelSecond} {
			select {
			case <-sigs:
				cancel()
			case <-done:
				return
			}
		}
	}()
	return context.WithValue(first, hurryKey{}, second), func() {
		signal.Stop(sigs)
		close(done)
		cancelFirst()
		cancelSecond()
	}
}

// hurryOf is the channel that closes at the second stop signal; nil (never
// ready) for a context notifyStop did not make, such as a test's.
func hurryOf(ctx context.Context) <-chan struct{} {
	if h, ok := ctx.Value(hurryKey{}).(context.Context); ok {
		return h.Done()
	}
	return nil
}
