package kube

import (
	"context"
	"encoding/json"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/netpol"
)

// ApplyNetworkPolicies server-side applies nps (as built by
// netpol.NetworkPolicies) with field manager "egressd", taking ownership of
// the fields it sets (force: egressd is the authority on these objects).
// It returns the objects as stored.
func ApplyNetworkPolicies(ctx context.Context, client *Client, nps []networkingv1.NetworkPolicy) ([]networkingv1.NetworkPolicy, error) {
	out := make([]networkingv1.NetworkPolicy, 0, len(nps))
	for _, np := range nps {
		np.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		body, err := json.Marshal(np)
		if err != nil {
			return out, fmt.Errorf("kube: encode NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		force := true
		got, err := client.NetworkPolicies(np.Namespace).Patch(ctx, np.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
		if err != nil {
			return out, fmt.Errorf("kube: apply NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		out = append(out, *got)
	}
	return out, nil
}

// CheckNamespace reads the NetworkPolicies of opts.Namespace and returns
// every egress path of the workload pods that bypasses egressd
// (netpol.Check).
func CheckNamespace(ctx context.Context, client *Client, opts netpol.Options) ([]netpol.Bypass, error) {
	l, err := client.NetworkPolicies(opts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list NetworkPolicies of %s: %w", opts.Namespace, err)
	}
	return netpol.Check(opts, l.Items), nil
}
