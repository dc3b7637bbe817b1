package metrics

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestChildren(t *testing.T) {
	m := New()
	made := map[string]int{}
	var mu sync.Mutex
	type key struct{ kind, verdict, reason string }
	c := NewChildren(func(k key) prometheus.Counter {
		mu.Lock()
		made[k.kind+"/"+k.verdict+"/"+k.reason]++
		mu.Unlock()
		return m.Requests.WithLabelValues(k.kind, k.verdict, k.reason, "false")
	})
	keys := []key{{"dns", "allow", "allowed"}, {"dns", "deny", "metadata"}, {"connect", "allow", "allowed"}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				for _, k := range keys {
					c.Get(k).Inc()
				}
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		var d dto.Metric
		if err := m.Requests.WithLabelValues(k.kind, k.verdict, k.reason, "false").Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.Counter.GetValue(); got != 800 {
			t.Errorf("%v: counted %v, want 800", k, got)
		}
	}
	for k, n := range made {
		if n != 1 {
			t.Errorf("%s made %d times, want once", k, n)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Get(keys[1]) }); allocs != 0 {
		t.Errorf("a hit allocates %v times", allocs)
	}
}
