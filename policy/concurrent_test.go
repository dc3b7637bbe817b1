package policy

import (
	"sync"
	"testing"
)

// TestSnapshotConcurrent runs decisions from several goroutines on one
// snapshot; with -race it proves Decide writes nothing shared.
func TestSnapshotConcurrent(t *testing.T) {
	s := decideSnapshot(t)
	c := testClient("prod", map[string]string{"app": "llm"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if d := s.Decide(DecideArgs{Client: c, Host: "a.blob.example.net", Port: 443}); !d.Allowed() {
					t.Errorf("denied: %+v", d)
					return
				}
			}
		})
	}
	wg.Wait()
}
