package main

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
)

// parsePolicies parses every file; errors of all files are joined so that
// one run of `egressd check` shows every problem.
func parsePolicies(files []watch.File) ([]policy.Document, error) {
	var docs []policy.Document
	var errs []error
	for _, f := range files {
		d, err := policy.Parse(f.Path, f.Data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, d...)
	}
	return docs, errors.Join(errs...)
}

// compilePolicies reads, parses, validates and compiles the policy paths;
// opts say whether this instance inspects (an inspection CA is loaded).
func compilePolicies(files []watch.File, opts policy.ValidateOptions) (*policy.Snapshot, error) {
	docs, err := parsePolicies(files)
	if err != nil {
		return nil, err
	}
	return policy.CompileWith(docs, opts)
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
