package main

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
)

// loadPolicies is the thin file adapter of policy.Load, the one loader of
// a policy set: check, run (start and every reload) and explain call it,
// so that check accepts exactly what run enforces. opts say whether this
// instance inspects (an inspection CA is loaded).
func loadPolicies(files []watch.File, opts policy.ValidateOptions) (*policy.Snapshot, error) {
	srcs := make([]policy.Source, len(files))
	for i, f := range files {
		srcs[i] = policy.Source{Name: f.Path, Data: f.Data}
	}
	return policy.Load(srcs, opts)
}

// readPods reads and parses pods files.
func readPods(paths []string) ([]*corev1.Pod, error) {
	files, err := watch.Read(paths)
	if err != nil {
		return nil, err
	}
	return parsePodsFiles(files)
}

// parsePodsFiles parses pods files.
func parsePodsFiles(files []watch.File) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for _, f := range files {
		p, err := identity.ParsePods(f.Path, f.Data)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p...)
	}
	return pods, nil
}
