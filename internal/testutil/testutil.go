// Package testutil holds the small pieces that tests and benchmark programs
// of several packages share: a buffer safe for a logger and a reader at
// once, a snapshot compiled from inline YAML, a running pod, a closed port,
// a CA certificate with its key in PEM (NewPEMCA) and a signed-note key
// pair (NoteKeys). It is for tests and bench/ only; no serving code
// imports it.
package testutil

import (
	"bytes"
	"net"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/policy"
)

// SyncBuffer is a bytes.Buffer that a writer (a logger, the audit log) and
// a test may use at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns a copy of what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Snapshot parses and compiles policies written inline.
func Snapshot(yaml string) (*policy.Snapshot, error) {
	docs, err := policy.Parse("test.yaml", []byte(yaml))
	if err != nil {
		return nil, err
	}
	return policy.Compile(docs)
}

// RunningPod is a Running pod holding ip; sa "" means the default service
// account.
func RunningPod(ns, name, sa, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{ServiceAccountName: sa},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// Reset empties the buffer (benchmarks keep it from growing).
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// ClosedPort returns a TCP port on 127.0.0.1 that nothing listens on (a
// listener's, closed): a dial to it is refused at once.
func ClosedPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}
