package k8stest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// CRDPath is the EgressPolicy CRD, relative to the repository root: the one
// source of truth (kube embeds a byte-identical copy).
const CRDPath = "charts/egressd/crds/egresspolicies.yaml"

// CRDResource is the resource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// EgressPolicyResource is the resource of EgressPolicy objects.
var EgressPolicyResource = schema.GroupVersionResource{Group: "egressd.dev", Version: "v1alpha1", Resource: "egresspolicies"}

// installCRD creates the CRD and waits until it is Established and served.
func (e *Env) installCRD(ctx context.Context) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, CRDPath))
	if err != nil {
		return fmt.Errorf("read CRD: %w", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("parse CRD: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := e.Dynamic.Resource(CRDResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := e.Dynamic.Resource(CRDResource).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil && established(got) {
			// Established can precede the first successful list by a moment.
			if _, err := e.Dynamic.Resource(EgressPolicyResource).Namespace("default").List(ctx, metav1.ListOptions{}); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD not established: %v", err)
		case <-tick.C:
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
