package identity

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/policy"
)

// ErrPodsFile marks an unreadable pods file; the previous index stays.
var ErrPodsFile = errors.New("identity: invalid pods file")

// ParsePods reads Kubernetes Pod objects from YAML or JSON: one or more
// documents, each a Pod or a List (kind List or PodList) of Pods. origin
// names the source in errors. Unknown fields are rejected, so a typo does not
// silently drop a pod's IP or labels.
func ParsePods(origin string, data []byte) ([]*corev1.Pod, error) {
	// One multi-document reader for policies and pods (policy.YAMLDocuments).
	var pods []*corev1.Pod
	for _, d := range policy.YAMLDocuments(data) {
		if d.Err != nil {
			return nil, fmt.Errorf("%w: %s: document %d (line %d): %v", ErrPodsFile, origin, d.N, d.Line, d.Err)
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(d.JSON, &head); err != nil {
			return nil, fmt.Errorf("%w: %s: document %d: %v", ErrPodsFile, origin, d.N, err)
		}
		switch head.Kind {
		case "Pod":
			p, err := decodePod(d.JSON)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: document %d: %v", ErrPodsFile, origin, d.N, err)
			}
			pods = append(pods, p)
		case "List", "PodList":
			for i, item := range head.Items {
				p, err := decodePod(item)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: document %d: items[%d]: %v", ErrPodsFile, origin, d.N, i, err)
				}
				pods = append(pods, p)
			}
		default:
			return nil, fmt.Errorf("%w: %s: document %d: kind %q, want Pod, PodList or List", ErrPodsFile, origin, d.N, head.Kind)
		}
	}
	return pods, nil
}

func decodePod(raw []byte) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return nil, err
	}
	if p.Kind != "" && p.Kind != "Pod" {
		return nil, fmt.Errorf("kind %q, want Pod", p.Kind)
	}
	if p.Name == "" {
		return nil, errors.New("metadata.name is required")
	}
	if p.Namespace == "" {
		return nil, fmt.Errorf("pod %q: metadata.namespace is required", p.Name)
	}
	return &p, nil
}
