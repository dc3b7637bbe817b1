package identity

import (
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/policy"
)

// Store is a Source whose index is replaced whole on every change (from the
// pods file or the pod informer). Lookups never block on a rebuild.
//
// Every Replace that changes what a lookup can return (a pod added or
// removed, an IP reused or become ambiguous, labels, service account, UID,
// workload, the Initialized condition) advances Generation and then calls
// the functions given to Subscribe: open connections were decided against
// the previous identities and must be decided again (revocation).
type Store struct {
	idx atomic.Pointer[index]
	gen atomic.Uint64

	// replaceMu orders Replace calls, so that generations and
	// notifications follow the order in which indexes were installed.
	replaceMu sync.Mutex

	subsMu sync.Mutex
	subs   map[uint64]func()
	nextID uint64
}

type index struct {
	byIP      map[netip.Addr]*policy.Client // nil value: ambiguous
	byName    map[podKey]*policy.Client     // live pods, without an IP
	known     int
	ambiguous int
}

type podKey struct{ namespace, name string }

// NewStore returns an empty store: every lookup is unknown until Replace.
func NewStore() *Store { return &Store{} }

// Replace rebuilds the index from pods. A pod gives an identity when it is
// Running or Pending and not hostNetwork, and, once it is being deleted,
// only until all its containers terminated or its grace period ended (its
// sandbox, and so its IP, may then be another pod's before the object
// goes); an IP claimed by two such pods (a terminating one and its
// address's next owner among them) gives none. It returns the number of IPs that map to exactly one pod.
//
// When the new index differs from the one it replaces in anything a lookup
// returns, Replace advances Generation and calls every subscriber, in the
// calling goroutine, before it returns. A Replace that changes nothing (a
// resync, a status update of a field egressd does not read, a pods file
// rewritten unchanged) notifies nobody.
func (s *Store) Replace(pods []*corev1.Pod) int {
	idx := &index{
		byIP:   make(map[netip.Addr]*policy.Client),
		byName: make(map[podKey]*policy.Client),
	}
	now := time.Now()
	for _, p := range pods {
		if !live(p, now) {
			continue
		}
		c := ClientFor(p)
		idx.byName[podKey{p.Namespace, p.Name}] = c
		for _, a := range PodAddrs(p) {
			if prev, ok := idx.byIP[a]; ok {
				if prev != nil {
					idx.byIP[a] = nil
					idx.ambiguous++
				}
				continue
			}
			cc := *c
			cc.IP = a
			idx.byIP[a] = &cc
		}
	}
	for _, c := range idx.byIP {
		if c != nil {
			idx.known++
		}
	}

	s.replaceMu.Lock()
	defer s.replaceMu.Unlock()
	old := s.idx.Swap(idx)
	if old != nil && sameIdentities(old.byIP, idx.byIP) {
		return idx.known
	}
	s.gen.Add(1)
	s.subsMu.Lock()
	subs := make([]func(), 0, len(s.subs))
	for _, f := range s.subs {
		subs = append(subs, f)
	}
	s.subsMu.Unlock()
	for _, f := range subs {
		f()
	}
	return idx.known
}

// Generation counts the changes Replace has published: zero before the
// first Replace, then one more for every Replace that changed the index. A
// consumer that remembers the generation it last acted on knows, by
// comparing, whether identities changed since.
func (s *Store) Generation() uint64 { return s.gen.Load() }

// Subscribe registers f to be called after every Replace that changes the
// index (see Replace), once the new index is in force: a Lookup made from f,
// or after it, sees the new identities. f runs in the goroutine that called
// Replace (the pods-file watcher or the informer's worker), so it must
// return quickly, typically by waking its own goroutine with a
// non-blocking send on a channel of capacity one; it must not call Replace.
// Notifications carry no data and may coalesce in the consumer: re-decide
// every open connection against Lookup. The returned function unsubscribes.
func (s *Store) Subscribe(f func()) (cancel func()) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	if s.subs == nil {
		s.subs = map[uint64]func(){}
	}
	id := s.nextID
	s.nextID++
	s.subs[id] = f
	return func() {
		s.subsMu.Lock()
		defer s.subsMu.Unlock()
		delete(s.subs, id)
	}
}

// Loaded reports whether Replace has been called at least once.
func (s *Store) Loaded() bool { return s.idx.Load() != nil }

// Lookup implements Source.
func (s *Store) Lookup(ip netip.Addr) (*policy.Client, bool) {
	idx := s.idx.Load()
	if idx == nil {
		return nil, false
	}
	c := idx.byIP[ip.Unmap()]
	return c, c != nil
}

// Pod returns the client of the live pod namespace/name, without an IP (a
// pod may have several, or none yet), or false when no live pod has that
// name. It serves lookups by name (Kubernetes Events, explain); requests
// are identified by Lookup alone.
func (s *Store) Pod(namespace, name string) (*policy.Client, bool) {
	idx := s.idx.Load()
	if idx == nil {
		return nil, false
	}
	c, ok := idx.byName[podKey{namespace, name}]
	return c, ok
}

// Known returns the number of IPs that map to exactly one pod.
func (s *Store) Known() int {
	if idx := s.idx.Load(); idx != nil {
		return idx.known
	}
	return 0
}

// ClientFor returns the policy client of pod p, without an IP: namespace,
// name, service account (a pod without one runs as "default"), labels,
// UID, workload (WorkloadOf) and the Initialized condition.
func ClientFor(p *corev1.Pod) *policy.Client {
	c := &policy.Client{
		Namespace:      p.Namespace,
		Pod:            p.Name,
		ServiceAccount: p.Spec.ServiceAccountName,
		Labels:         p.Labels,
		UID:            string(p.UID),
		Workload:       WorkloadOf(p),
		Initialized:    Initialized(p),
	}
	if c.ServiceAccount == "" {
		c.ServiceAccount = "default"
	}
	return c
}

// sameIdentities reports whether two indexes give every IP the same answer.
func sameIdentities(a, b map[netip.Addr]*policy.Client) bool {
	if len(a) != len(b) {
		return false
	}
	for ip, ca := range a {
		cb, ok := b[ip]
		if !ok || (ca == nil) != (cb == nil) {
			return false
		}
		if ca != nil && !sameClient(ca, cb) {
			return false
		}
	}
	return true
}

// sameClient compares every field of policy.Client. A new field there must
// be added here, or a change of it would revoke nothing;
// TestSameClientCoversEveryField holds that.
func sameClient(a, b *policy.Client) bool {
	return a.IP == b.IP && a.Namespace == b.Namespace && a.Pod == b.Pod &&
		a.ServiceAccount == b.ServiceAccount && maps.Equal(a.Labels, b.Labels) &&
		a.UID == b.UID && a.Workload == b.Workload && a.Initialized == b.Initialized
}

// live reports whether p gives an identity at now: Running or Pending,
// not hostNetwork, and not a pod being deleted whose containers all
// terminated or whose grace period ended (metadata.deletionTimestamp is
// when the grace period ends). The kubelet tears the sandbox down, and
// the network plugin releases the IP, before the API object goes; a new
// pod given that IP meanwhile must not be taken for the old one
// (cilium#16565, antrea#6507 are this race elsewhere).
func live(p *corev1.Pod, now time.Time) bool {
	if p == nil || p.Spec.HostNetwork {
		return false
	}
	if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
		return false
	}
	if p.DeletionTimestamp == nil {
		return true
	}
	if !now.Before(p.DeletionTimestamp.Time) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			return true // one still runs (or waits): the IP is still its
		}
	}
	return false
}

// PodAddrs are the addresses of p's status (podIPs, then podIP), parsed,
// unmapped and each once; what cannot be parsed is left out. The store
// indexes a live pod by them, and explain says why an address is nobody's
// with them.
func PodAddrs(p *corev1.Pod) []netip.Addr {
	out := make([]netip.Addr, 0, len(p.Status.PodIPs)+1)
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	add(p.Status.PodIP)
	return out
}
