package metrics

import (
	"sync"
	"sync/atomic"
)

// Children keeps the children of metric vectors by label set, so that a
// request looks each one up once per process instead of once per request:
// a vector's WithLabelValues hashes every label value and takes the
// vector's lock on every call, and the DNS server and the proxy update
// several per request. K is what the label values are made of (a struct
// of kind, verdict, reason...); V whatever the caller keeps per label set
// (one prometheus.Counter, or a struct of the several one request
// updates). Keys must come from small fixed sets, as every label of this
// package does (bounded cardinality): a new key copies the map, so that a
// lookup is a plain map read without a lock or an allocation. Safe for
// concurrent use.
type Children[K comparable, V any] struct {
	make func(K) V

	mu sync.Mutex // serializes additions
	m  atomic.Pointer[map[K]V]
}

// NewChildren returns an empty cache whose values make builds, once per
// key (under a lock: make may be slow, it is called rarely).
func NewChildren[K comparable, V any](make func(K) V) *Children[K, V] {
	return &Children[K, V]{make: make}
}

// Get returns the value for k, made on its first use.
func (c *Children[K, V]) Get(k K) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		n = len(*old)
	}
	next := make(map[K]V, n+1)
	if old != nil {
		for k2, v2 := range *old {
			next[k2] = v2
		}
	}
	v := c.make(k)
	next[k] = v
	c.m.Store(&next)
	return v
}
