package kube_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

// One control plane for the whole test binary; each test has its namespace.
func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

// eventually polls cond until it holds. Informers are asynchronous by
// design; this waits on the observable state, never a fixed sleep.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// harness is a running Controller and what it feeds.
type harness struct {
	ctrl    *kube.Controller
	store   *identity.Store
	metrics *metrics.Metrics
	mu      sync.Mutex
	snap    *policy.Snapshot
	sets    int
	runErr  chan error
}

func (h *harness) snapshot() (*policy.Snapshot, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap, h.sets
}

// run starts a controller for ns with the given clients and waits for Synced.
// lean is the Client egressd runs with, for env's admin.
func lean(t *testing.T, env *k8stest.Env) *kube.Client {
	t.Helper()
	c, err := kube.NewClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func run(t *testing.T, ns string, client *kube.Client) *harness {
	t.Helper()
	h := &harness{store: identity.NewStore(), metrics: metrics.New(), runErr: make(chan error, 1)}
	ctrl, err := kube.New(kube.Config{
		Namespace:  ns,
		Client:     client,
		Identities: h.store,
		Metrics:    h.metrics,
		SetPolicy: func(s *policy.Snapshot) {
			h.mu.Lock()
			h.snap, h.sets = s, h.sets+1
			h.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.ctrl = ctrl
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.runErr <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	eventually(t, "caches to sync", ctrl.Synced)
	return h
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	full := kube.Config{Namespace: "a", Client: &kube.Client{},
		Identities: identity.NewStore(), SetPolicy: func(*policy.Snapshot) {}}
	cases := []struct {
		name string
		mod  func(*kube.Config)
	}{
		{"namespace", func(c *kube.Config) { c.Namespace = "" }},
		{"client", func(c *kube.Config) { c.Client = nil }},
		{"identities", func(c *kube.Config) { c.Identities = nil }},
		{"setpolicy", func(c *kube.Config) { c.SetPolicy = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := full
			tc.mod(&c)
			if _, err := kube.New(c); err == nil {
				t.Fatal("New accepted an incomplete config")
			}
		})
	}
	if _, err := kube.New(full); err != nil {
		t.Fatalf("complete config: %v", err)
	}
}
