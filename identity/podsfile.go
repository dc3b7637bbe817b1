package identity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ErrPodsFile marks an unreadable pods file; the previous index stays.
var ErrPodsFile = errors.New("identity: invalid pods file")

// ParsePods reads Kubernetes Pod objects from YAML or JSON: one or more
// documents, each a Pod or a List (kind List or PodList) of Pods. origin
// names the source in errors. Unknown fields are rejected, so a typo does not
// silently drop a pod's IP or labels.
func ParsePods(origin string, data []byte) ([]*corev1.Pod, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var pods []*corev1.Pod
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return pods, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: document %d: %v", ErrPodsFile, origin, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("%w: %s: document %d: %v", ErrPodsFile, origin, doc, err)
		}
		switch head.Kind {
		case "Pod":
			p, err := decodePod(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: document %d: %v", ErrPodsFile, origin, doc, err)
			}
			pods = append(pods, p)
		case "List", "PodList":
			for i, item := range head.Items {
				p, err := decodePod(item)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: document %d: items[%d]: %v", ErrPodsFile, origin, doc, i, err)
				}
				pods = append(pods, p)
			}
		default:
			return nil, fmt.Errorf("%w: %s: document %d: kind %q, want Pod, PodList or List", ErrPodsFile, origin, doc, head.Kind)
		}
	}
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

func isOnlyComments(b []byte) bool {
	for _, line := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
