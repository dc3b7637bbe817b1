package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/egressd/egressd/policy"
)

// EgressPolicyResource is the resource of EgressPolicy objects.
var EgressPolicyResource = schema.GroupVersionResource{Group: policy.Group, Version: policy.Version, Resource: "egresspolicies"}

// Work items: each rebuilds its whole kind from the lister, so bursts of
// events collapse into one rebuild (the queue deduplicates keys).
const (
	itemPods     = "pods"
	itemPolicies = "policies"
)

// Controller watches one namespace's Pods and EgressPolicies.
type Controller struct {
	cfg    Config
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   cache.SharedIndexInformer
	egps   cache.SharedIndexInformer
	health *health

	podsDone, policiesDone atomic.Bool

	// Owned by the worker goroutine.
	lastGood map[types.UID]goodVersion
	applied  string // fingerprint of the documents of the snapshot in force
}

type goodVersion struct {
	generation int64
	doc        policy.Document
}

// New returns a controller for cfg; Run starts it.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:      cfg,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		health:   newHealth(cfg.Metrics, cfg.Logger),
		lastGood: map[types.UID]goodVersion{},
	}
	ns := cfg.Namespace
	podLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := cfg.Client.Pods(ns).List(ctx, o)
			c.health.observe(ctx, itemPods, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := cfg.Client.Pods(ns).Watch(ctx, o)
			c.health.observe(ctx, itemPods, err)
			return w, err
		},
	}
	egpLW := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := cfg.Client.EgressPolicies(ns).List(ctx, o)
			c.health.observe(ctx, itemPolicies, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := cfg.Client.EgressPolicies(ns).Watch(ctx, o)
			c.health.observe(ctx, itemPolicies, err)
			return w, err
		},
	}
	c.pods = cache.NewSharedIndexInformer(podLW, &corev1.Pod{}, cfg.ResyncPeriod, cache.Indexers{})
	c.egps = cache.NewSharedIndexInformer(egpLW, &unstructured.Unstructured{}, cfg.ResyncPeriod, cache.Indexers{})
	for item, inf := range map[string]cache.SharedIndexInformer{itemPods: c.pods, itemPolicies: c.egps} {
		// managedFields are never read; dropping them halves the cache.
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
			c.health.observe(ctx, item, err)
		}); err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		enqueue := func(any) { c.queue.Add(item) }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
	}
	return c, nil
}

// Synced reports whether both caches have synced and the first identity
// index and policy snapshot have been handed over (readiness).
func (c *Controller) Synced() bool { return c.podsDone.Load() && c.policiesDone.Load() }

// Run watches until ctx ends. It returns ErrNotSynced (wrapped) if ctx ends
// before the caches sync, nil after a clean stop.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	go c.pods.RunWithContext(ctx)
	go c.egps.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced, c.egps.HasSynced) {
		return fmt.Errorf("%w: %w", ErrNotSynced, context.Cause(ctx))
	}
	// An empty namespace gives no events: build the first state anyway.
	c.queue.Add(itemPods)
	c.queue.Add(itemPolicies)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.next(ctx) {
		}
	}()
	<-ctx.Done()
	c.queue.ShutDown()
	<-done
	return nil
}

func (c *Controller) next(ctx context.Context) bool {
	item, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(item)
	var err error
	switch item {
	case itemPods:
		c.syncPods()
	case itemPolicies:
		err = c.syncPolicies(ctx)
	}
	if err != nil && ctx.Err() == nil {
		c.cfg.Logger.Warn("kube: sync failed, retrying", "item", item, "err", err)
		c.queue.AddRateLimited(item)
		return true
	}
	c.queue.Forget(item)
	return true
}

// syncPods rebuilds the identity index from every pod in the cache; the
// store applies the rules (live, not hostNetwork, IP held by one pod).
func (c *Controller) syncPods() {
	objs := c.pods.GetStore().List()
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	n := c.cfg.Identities.Replace(pods)
	c.cfg.Metrics.Identities.Set(float64(n))
	c.cfg.Metrics.Reloads.WithLabelValues("kube").Inc()
	c.podsDone.Store(true)
}

func stripManagedFields(obj any) (any, error) {
	if a, ok := obj.(metav1.Object); ok {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// errStale is what health reports when a list or watch fails.
var errStale = errors.New("kube: API server unreachable")
