package identity

import (
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSubscribe walks the store through the changes that can change a
// decision, and those that cannot: each step either advances the
// generation and notifies once, or does neither.
func TestSubscribe(t *testing.T) {
	s := NewStore()
	var calls atomic.Int64
	var seenGen uint64
	cancel := s.Subscribe(func() {
		calls.Add(1)
		seenGen = s.Generation() // the new index is in force before the call
	})
	web := func() *corev1.Pod {
		p := pod("web", "web-sa", corev1.PodRunning, false, "127.0.0.2")
		p.UID = "uid-web"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
		return p
	}
	other := pod("other", "x", corev1.PodRunning, false, "127.0.0.3")

	steps := []struct {
		name   string
		pods   func() []*corev1.Pod
		notify bool
	}{
		{"first load", func() []*corev1.Pod { return []*corev1.Pod{web(), other} }, true},
		{"same pods again (resync)", func() []*corev1.Pod { return []*corev1.Pod{other, web()} }, false},
		{"status egressd does not read", func() []*corev1.Pod {
			p := web()
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
			return []*corev1.Pod{p, other}
		}, false},
		{"pending pod without an IP", func() []*corev1.Pod {
			return []*corev1.Pod{web(), other, pod("scheduling", "x", corev1.PodPending, false)}
		}, false},
		{"labels", func() []*corev1.Pod {
			p := web()
			p.Labels = map[string]string{"app": "web", "tier": "gpu"}
			return []*corev1.Pod{p, other}
		}, true},
		{"service account", func() []*corev1.Pod {
			p := web()
			p.Labels = map[string]string{"app": "web", "tier": "gpu"}
			p.Spec.ServiceAccountName = "other-sa"
			return []*corev1.Pod{p, other}
		}, true},
		{"initialized flips", func() []*corev1.Pod {
			p := web()
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			return []*corev1.Pod{p, other}
		}, true},
		{"initialized back", func() []*corev1.Pod { return []*corev1.Pod{web(), other} }, true},
		{"pod removed", func() []*corev1.Pod { return []*corev1.Pod{web()} }, true},
		{"pod added", func() []*corev1.Pod { return []*corev1.Pod{web(), other} }, true},
		{"pod finished", func() []*corev1.Pod {
			p := web()
			p.Status.Phase = corev1.PodSucceeded
			return []*corev1.Pod{p, other}
		}, true},
		{"ip reused by a new pod of the same name", func() []*corev1.Pod {
			p := web()
			p.UID = types.UID("uid-web-2")
			return []*corev1.Pod{p, other}
		}, true},
		{"ip claimed twice", func() []*corev1.Pod {
			p := web()
			p.UID = types.UID("uid-web-2")
			return []*corev1.Pod{p, other, pod("dup", "x", corev1.PodRunning, false, "127.0.0.3")}
		}, true},
		{"empty", func() []*corev1.Pod { return nil }, true},
		{"empty again", func() []*corev1.Pod { return nil }, false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			gen, before := s.Generation(), calls.Load()
			s.Replace(st.pods())
			wantGen, wantCalls := gen, before
			if st.notify {
				wantGen, wantCalls = gen+1, before+1
			}
			if got := s.Generation(); got != wantGen {
				t.Errorf("generation %d, want %d", got, wantGen)
			}
			if got := calls.Load(); got != wantCalls {
				t.Errorf("%d notifications, want %d", got-before, wantCalls-before)
			}
			if st.notify && seenGen != wantGen {
				t.Errorf("subscriber saw generation %d, want %d", seenGen, wantGen)
			}
		})
	}

	t.Run("unsubscribed", func(t *testing.T) {
		second := 0
		cancel2 := s.Subscribe(func() { second++ })
		cancel()
		before, gen := calls.Load(), s.Generation()
		s.Replace([]*corev1.Pod{web()})
		if calls.Load() != before {
			t.Error("cancelled subscriber was called")
		}
		if second != 1 || s.Generation() != gen+1 {
			t.Errorf("remaining subscriber called %d times, generation %d → %d", second, gen, s.Generation())
		}
		cancel2()
	})
}
