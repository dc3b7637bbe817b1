package identity

import (
	"net/netip"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/policy"
)

// Store is a Source whose index is replaced whole on every change (from the
// pods file or the pod informer). Lookups never block on a rebuild.
type Store struct {
	idx atomic.Pointer[index]
}

type index struct {
	byIP      map[netip.Addr]*policy.Client // nil value: ambiguous
	known     int
	ambiguous int
}

// NewStore returns an empty store: every lookup is unknown until Replace.
func NewStore() *Store { return &Store{} }

// Replace rebuilds the index from pods. A pod gives an identity when it is
// Running or Pending and not hostNetwork; an IP claimed by two such pods
// gives none. It returns the number of IPs that map to exactly one pod.
func (s *Store) Replace(pods []*corev1.Pod) int {
	idx := &index{byIP: make(map[netip.Addr]*policy.Client)}
	for _, p := range pods {
		if !live(p) {
			continue
		}
		c := ClientFor(p)
		seen := map[netip.Addr]bool{}
		for _, pip := range podIPs(p) {
			a, err := netip.ParseAddr(pip)
			if err != nil {
				continue
			}
			a = a.Unmap()
			if seen[a] {
				continue
			}
			seen[a] = true
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
	s.idx.Store(idx)
	return idx.known
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

// Known returns the number of IPs that map to exactly one pod.
func (s *Store) Known() int {
	if idx := s.idx.Load(); idx != nil {
		return idx.known
	}
	return 0
}

// ClientFor returns the policy client of pod p, without an IP. A pod without
// a service account name runs as "default".
func ClientFor(p *corev1.Pod) *policy.Client {
	c := &policy.Client{
		Namespace:      p.Namespace,
		Pod:            p.Name,
		ServiceAccount: p.Spec.ServiceAccountName,
		Labels:         p.Labels,
	}
	if c.ServiceAccount == "" {
		c.ServiceAccount = "default"
	}
	return c
}

func live(p *corev1.Pod) bool {
	if p == nil || p.Spec.HostNetwork {
		return false
	}
	return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending
}

func podIPs(p *corev1.Pod) []string {
	out := make([]string, 0, len(p.Status.PodIPs)+1)
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	if p.Status.PodIP != "" {
		out = append(out, p.Status.PodIP)
	}
	return out
}
