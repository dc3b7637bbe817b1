package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestNotifyStop: the first SIGTERM ends the run context, the second the
// lameduck (hurryOf); a test's own context has no hurry channel.
func TestNotifyStop(t *testing.T) {
	ctx, stop := notifyStop(context.Background())
	defer stop()
	hurry := hurryOf(ctx)
	if hurry == nil {
		t.Fatal("hurryOf(notifyStop context) is nil")
	}
	kill := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	kill()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("first SIGTERM did not end the context")
	}
	select {
	case <-hurry:
		t.Fatal("one SIGTERM ended the lameduck too")
	default:
	}
	kill()
	select {
	case <-hurry:
	case <-time.After(5 * time.Second):
		t.Fatal("second SIGTERM did not end the lameduck")
	}
	if hurryOf(context.Background()) != nil {
		t.Error("hurryOf(a plain context) is not nil")
	}
}
